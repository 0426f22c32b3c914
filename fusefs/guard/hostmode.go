package guard

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
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
//   - device nodes: never (fusefs's Mknod, DEVICE_NODE_DENIED).

// AllowedModeBits are the permission bits the mount may give an object of
// type typ (S_IFMT bits) in BACKING.
func AllowedModeBits(typ uint32) uint32 {
	if typ == syscall.S_IFDIR {
		return 0o777 | syscall.S_ISVTX | syscall.S_ISGID
	}
	return 0o777 | syscall.S_ISVTX
}

// ChmodAllowed reports whether the mount may chmod an object of type typ
// to mode, even one a host's file has already: chmod 4711 of a host's
// set-user-ID 4700 file would let every user run it.
func ChmodAllowed(typ, mode uint32) bool {
	return mode&07777&^AllowedModeBits(typ) == 0
}

// HostFileMode is the mode a regular file's new content may carry: mode
// without set-ID bits.
func HostFileMode(mode uint32) uint32 {
	return mode & AllowedModeBits(syscall.S_IFREG)
}

// AllowedXattr reports whether the mount may set attr.
func AllowedXattr(attr string) bool {
	switch {
	case attr == "system.posix_acl_access", attr == "system.posix_acl_default":
		return true
	case strings.HasPrefix(attr, "user.overlay."):
		return false
	}
	return strings.HasPrefix(attr, "user.")
}

// RemovableXattr reports whether the mount may remove attr: what it may
// set, and a file capability, whose removal only drops a privilege (the
// kernel removes it itself when a write or a truncate changes the file).
func RemovableXattr(attr string) bool {
	return attr == "security.capability" || AllowedXattr(attr)
}

// ListedXattr reports whether the mount lists attr: every name but
// trusted.*, which the host's kernel lists only to a caller with
// CAP_SYS_ADMIN, and the daemon lists as root (a FUSE filesystem's list
// reaches every caller as it is).
func ListedXattr(attr string) bool { return !strings.HasPrefix(attr, "trusted.") }

// MetadataXattr reports whether attr is metadata like the mode bits, read
// of any file without the credential check: security.* and system.*
// (capabilities, SELinux labels, ACLs), which ls asks for on every entry.
// user.* and trusted.* can hold content: a credential's are refused.
func MetadataXattr(attr string) bool {
	return strings.HasPrefix(attr, "security.") || strings.HasPrefix(attr, "system.")
}

// DropSetID clears the set-ID bits of the file held by fd before the
// daemon writes new content into it in place: the daemon writes as root,
// which the kernel lets keep them.
func DropSetID(fd int) error {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return err
	}
	if m := st.Mode & 07777; HostFileMode(m) != m {
		return dirfd.Chmod(fd, HostFileMode(m))
	}
	return nil
}
