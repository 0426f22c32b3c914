package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/realm-dev/realm/errcode"
)

// Host meaning. BACKING is the host's: an object the mount makes or
// changes may only be what it appears to be on the mount, judged as the
// host will see it in BACKING. The mount itself is nosuid and nodev, but
// BACKING's filesystem usually is not, so a set-user-ID copy of a shell,
// a file capability or a device node made through the mount would be a
// privilege on the host for whoever runs or opens it there. What the mount
// may give is an allowlist:
//
//   - mode bits: rwx for everyone and the sticky bit; a directory may also
//     be set-group-ID (group inheritance, which a shared project directory
//     uses and which runs nothing). Set-user-ID and set-group-ID on any
//     other object are never set: a chmod to a mode with one is refused
//     (EPERM, PRIVILEGE_DENIED), a create asking for one gets the mode
//     without it (audited), and a write's temp, an in-place commit and an
//     append in place drop the ones a host's file had, as the kernel does
//     for a write by anyone but root;
//   - extended attributes: user.* (content a program keeps beside the
//     file; not user.overlay.*, which an overlayfs mounted with userxattr
//     reads as layer metadata) and the POSIX ACLs (system.posix_acl_access
//     and _default: the access a chmod could give too). Every other name
//     (security.capability, security.selinux, trusted.*, ...) grants or
//     labels privilege on the host and is refused (EPERM, PRIVILEGE_DENIED);
//     of those, only security.capability may be removed (that drops a
//     privilege), and a write's temp never carries it;
//   - device nodes: never (Mknod, DEVICE_NODE_DENIED).

// allowedModeBits are the permission bits the mount may give an object of
// type typ (S_IFMT bits) in BACKING.
func allowedModeBits(typ uint32) uint32 {
	if typ == syscall.S_IFDIR {
		return 0o777 | syscall.S_ISVTX | syscall.S_ISGID
	}
	return 0o777 | syscall.S_ISVTX
}

// allowedXattr reports whether the mount may set attr.
func allowedXattr(attr string) bool {
	switch {
	case attr == "system.posix_acl_access", attr == "system.posix_acl_default":
		return true
	case strings.HasPrefix(attr, "user.overlay."):
		return false
	}
	return strings.HasPrefix(attr, "user.")
}

// removableXattr reports whether the mount may remove attr: what it may
// set, and a file capability, whose removal only drops a privilege (the
// kernel removes it itself when a write or a truncate changes the file).
func removableXattr(attr string) bool {
	return attr == "security.capability" || allowedXattr(attr)
}

// newHostMode is mode (permission bits of a new object of type typ) within
// the allowlist; a set-ID bit it drops is audited (the create goes on:
// natively the object would be made, and its mode shows what it got).
func (n *Node) newHostMode(ctx context.Context, op, name string, typ, mode uint32) uint32 {
	allowed := mode & allowedModeBits(typ)
	if allowed != mode {
		n.fsys.refuseAs(ctx, op, n, name, errcode.PrivilegeDenied, 0, RulePrivilegeSetID)
	}
	return allowed
}

// denyChmod refuses a chmod of n (of type typ) to a mode outside the
// allowlist, even one a host's file has already: chmod 4711 of a host's
// set-user-ID 4700 file would let every user run it.
func (n *Node) denyChmod(ctx context.Context, typ, mode uint32) syscall.Errno {
	if mode&07777&^allowedModeBits(typ) == 0 {
		return 0
	}
	return n.fsys.refuse(ctx, "setattr", n, "", errcode.PrivilegeDenied, RulePrivilegeSetID)
}
