package fusefs

import (
	"context"
	"syscall"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/guard"
)

// Host meaning: the allowlists of mode bits and xattrs are fusefs/guard's
// (hostmode.go says what they let through and why); what is here audits
// what they refuse.

// hostFileMode is the mode a regular file's new content may carry: mode
// without set-ID bits (guard.HostFileMode).
func hostFileMode(mode uint32) uint32 { return guard.HostFileMode(mode) }

// allowedXattr reports whether the mount may set attr (guard.AllowedXattr).
func allowedXattr(attr string) bool { return guard.AllowedXattr(attr) }

// removableXattr reports whether the mount may remove attr
// (guard.RemovableXattr).
func removableXattr(attr string) bool { return guard.RemovableXattr(attr) }

// dropSetID clears the set-ID bits of the file held by fd before the daemon
// writes new content into it in place (guard.DropSetID).
func dropSetID(fd int) error { return guard.DropSetID(fd) }

// newHostMode is mode (permission bits of a new object of type typ) within
// the allowlist; a set-ID bit it drops is audited (the create goes on:
// natively the object would be made, and its mode shows what it got).
func (n *Node) newHostMode(ctx context.Context, op, name string, typ, mode uint32) uint32 {
	allowed := mode & guard.AllowedModeBits(typ)
	if allowed != mode {
		n.fsys.refuseAs(ctx, op, n, name, errcode.PrivilegeDenied, 0, RulePrivilegeSetID)
	}
	return allowed
}

// denyChmod refuses a chmod of n (of type typ) to a mode outside the
// allowlist (guard.ChmodAllowed).
func (n *Node) denyChmod(ctx context.Context, typ, mode uint32) syscall.Errno {
	if guard.ChmodAllowed(typ, mode) {
		return 0
	}
	return n.fsys.refuse(ctx, "setattr", n, "", errcode.PrivilegeDenied, RulePrivilegeSetID)
}
