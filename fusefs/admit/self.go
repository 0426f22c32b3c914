package admit

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/guard"
)

// DenySelf is the guard's check of an operation on n itself, after its
// fd is verified (guard.Guard.JudgeSelf): a credential by path and by
// identity, unless made through the mount and unchanged since (st, when
// not nil, is the fd's stat: the identity n stands for (verify), which is
// read from n with its generation, and its size and mtime), and, when the
// operation changes n or names it anew (changes: a write open, truncate,
// setattr, an xattr change, a link's source), the protect rule. It costs
// no system call.
func (g *Gate) DenySelf(ctx context.Context, op string, n Object, st *unix.Stat_t, changes bool) syscall.Errno {
	if !g.Guard.On() {
		return 0
	}
	rel := n.Rel("")
	credential, rule := g.Guard.JudgeSelf(rel, n.FileID(), st, n.IsDir(), changes)
	if credential {
		return g.refuseCredential(ctx, op, rel, rel)
	}
	return g.refuseProtect(ctx, op, rel, rule)
}

// NoteLookup records a credential file's identity (st's dev and ino, and
// gen, its generation) as lookup finds it as name in dir, and a protected
// file's (guard.Guard.NoteLookup). An entry the policy hides is ENOENT,
// audited CREDENTIAL_PATH_DENIED.
//
// The workspace path is built only when the answer can matter: for a
// regular file (its identity may need recording) or when denied entries are
// hidden. Lookup is the hottest operation of the mount.
func (g *Gate) NoteLookup(ctx context.Context, dir Place, name string, st *unix.Stat_t, gen uint64) syscall.Errno {
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if !g.Guard.On() || !(regular || g.Guard.Hiding()) {
		return 0
	}
	rel := dir.Rel(name)
	if g.Guard.NoteLookup(rel, st, gen) {
		return g.auditCredential(ctx, "lookup", rel, rel, syscall.ENOENT)
	}
	return 0
}

// Planting. A protected path (policy.Matcher.Protected: host configuration
// a program of the host executes or trusts, such as .git/hooks/pre-commit
// or .envrc) may be read through the mount but not made, written,
// truncated, renamed or linked onto, nor have its metadata changed; every
// route that puts bytes or a name at a path checks the path the object
// has after the operation: prepare (create, mknod, symlink, link, rename's
// target), the write open, truncate, setattr and xattr changes
// (prepareSelf), both names of an exchange, a directory renamed with
// protected paths beneath its new name (DenyDirRename), a symlink named
// like a protected directory (DenySymlink), and the commit of a write
// whose file was moved since it was opened (DenyCommit). A protected file
// is protected under every name the host gave it: the scan and every
// lookup record its identity (guard.Guard.ProtIDs), which every check of
// a change to a node itself asks (DenySelf, DenyCommit).

// DenyCommit re-checks the protect rule on the place a write of file is
// about to commit to, name in dir (held by pfd), under the entry's lock
// (guard.CommitProtected).
func (g *Gate) DenyCommit(ctx context.Context, dir Place, pfd int, name string, file Object) syscall.Errno {
	if !g.Guard.On() {
		return 0
	}
	rel := Join(g.DirRel(dir, pfd), name)
	return g.refuseProtect(ctx, "commit", rel, g.Guard.CommitProtected(rel, file.FileID()))
}

// Host meaning: the allowlists of mode bits and xattrs are fusefs/guard's
// (hostmode.go says what they let through and why); what is here audits
// what they refuse.

// DenyChmod refuses a chmod of n (of type typ) to a mode outside the
// allowlist (guard.ChmodAllowed).
func (g *Gate) DenyChmod(ctx context.Context, n Place, typ, mode uint32) syscall.Errno {
	if guard.ChmodAllowed(typ, mode) {
		return 0
	}
	return g.Refuse(ctx, "setattr", n, "", errcode.PrivilegeDenied, RulePrivilegeSetID)
}

// DenySetxattr refuses setting attr on n unless the mount may
// (guard.AllowedXattr).
func (g *Gate) DenySetxattr(ctx context.Context, n Place, attr string) syscall.Errno {
	if guard.AllowedXattr(attr) {
		return 0
	}
	return g.Refuse(ctx, "setxattr", n, "", errcode.PrivilegeDenied, RulePrivilegeXattr)
}

// DenyRemovexattr refuses removing attr from n unless the mount may
// (guard.RemovableXattr).
func (g *Gate) DenyRemovexattr(ctx context.Context, n Place, attr string) syscall.Errno {
	if guard.RemovableXattr(attr) {
		return 0
	}
	return g.Refuse(ctx, "removexattr", n, "", errcode.PrivilegeDenied, RulePrivilegeXattr)
}

// Modes of new objects. The mount negotiates FUSE_DONT_MASK (fusefs's
// MountOptions): the kernel sends the mode the caller asked for, without
// its umask, and the daemon, whose own umask is 0 (realmfs sets it at
// start), applies the rule the kernel applies natively on a filesystem
// with POSIX ACLs (guard.NewMode: a parent's default ACL decides, else the
// umask). Without DONT_MASK the kernel would apply the umask itself even
// under a default ACL, and with the daemon's own umask on top a
// group-shared tree (umask 002) would lose group write.
//
// The kernel sends the caller's umask with every CREATE, MKDIR and MKNOD
// (current_umask(), whatever DONT_MASK says), but go-fuse's node API does
// not pass it on: the mount's raw filesystem notes it for the request
// (requestnotes.NotingFS, in Umasks). Where the note is missing (a request
// that did not come through the mount's raw filesystem) the caller's umask
// is read from /proc/PID/status (guard.ProcUmask), which is the same
// umask: the thread is blocked in the system call it runs under. The note
// spares a create the twelve system calls of reading that file.

// NewMode is the mode (permission and set-ID bits, without the type) an
// object of type typ made with mode by the caller, as name in dir (held
// by pfd), gets: natively's (guard.NewMode), within the allowlist
// (guard.AllowedModeBits). A set-ID bit it drops is audited as a refusal
// of op, answering nothing: the create goes on (natively the object would
// be made, and its mode shows what it got).
func (g *Gate) NewMode(ctx context.Context, op string, dir Place, pfd int, name string, typ, mode uint32) uint32 {
	mode = guard.NewMode(pfd, mode, func() uint32 { return g.callerUmask(ctx) })
	allowed := mode & guard.AllowedModeBits(typ)
	if allowed != mode {
		g.RefuseAs(ctx, op, dir, name, errcode.PrivilegeDenied, 0, RulePrivilegeSetID)
	}
	return allowed
}

// callerUmask is the umask of the process that made the request in ctx; 0
// for a request that did not come from the kernel (the unit tests).
func (g *Gate) callerUmask(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok || c == nil {
		return 0
	}
	if c.Pid == 0 {
		return guard.UmaskUnknown
	}
	if u, ok := g.Umasks.Of(ctx); ok {
		return u
	}
	return guard.ProcUmask(c.Pid)
}

// HiddenIn returns the filter of a listing of directory dir: realm's temp
// files always, credentials too when the policy hides them.
func (g *Gate) HiddenIn(dir Place) func(name string) bool {
	if !g.Guard.Hiding() {
		return g.Hidden
	}
	return func(name string) bool {
		return g.Hidden(name) || g.Guard.Denied(dir.Rel(name))
	}
}
