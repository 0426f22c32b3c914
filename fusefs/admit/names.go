package admit

import (
	"context"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
)

// The checks of a name an operation makes, removes or renames (fusefs's
// prepare, then what each op checks beyond it).

// AdmitEntry is the first step of an operation on name in dir, before its
// directory fd is opened (guard.AdmitEntry): on a read-only mount EROFS;
// a hidden name (realm's temps) ENOENT with no audit line to an operation
// that needs it to exist, and EACCES, audited PATH_ESCAPE, to one that
// makes it.
func (g *Gate) AdmitEntry(ctx context.Context, op string, dir Place, name string, use guard.Use) syscall.Errno {
	switch guard.AdmitEntry(g.ReadOnly, g.Hidden(name), use) {
	case guard.EntryReadOnly:
		return syscall.EROFS
	case guard.EntryAbsent:
		return syscall.ENOENT
	case guard.EntryHiddenName:
		return g.Refuse(ctx, op, dir, name, errcode.PathEscape, RuleEscapeTempName)
	}
	return 0
}

// JudgeName is prepare's judgement of name (rel, its path) in the
// directory held by pfd (guard.Guard.JudgeName), audited.
func (g *Gate) JudgeName(ctx context.Context, op string, pfd int, rel, name string, use guard.Use) syscall.Errno {
	return g.refuseName(ctx, op, rel, g.Guard.JudgeName(rel, pfd, name, use))
}

// JudgeRename is a rename's judgement of both its names at their places
// now (guard.Guard.JudgeRename: both names of an exchange against the
// protect rule, then each name's own checks), audited by the path refused.
func (g *Gate) JudgeRename(ctx context.Context, r guard.RenameNames) syscall.Errno {
	rule, rel := g.Guard.JudgeRename(r)
	return g.refuseName(ctx, "rename", rel, rule)
}

// DenyHiddenCredential refuses op on name in dir, when the policy hides
// denied entries, if its path is a credential: a name an operation makes
// without prepare's judgement (a hidden credential mkdir would say
// exists: answering EEXIST would say it does). Every check of an
// operation on a node itself (open, truncate, setattr, xattrs, link,
// copy_file_range) is DenySelf's.
func (g *Gate) DenyHiddenCredential(ctx context.Context, op string, dir Place, name string) syscall.Errno {
	if !g.Guard.Hiding() {
		return 0
	}
	if rel := dir.Rel(name); g.Guard.Denied(rel) {
		return g.refuseCredential(ctx, op, rel, rel)
	}
	return 0
}

// Claim gives a just-created object, held by fd, to the caller, when the
// daemon creates on behalf of other users (guard.Claims, guard.NewOwner):
// in a set-group-ID directory (held by pfd) the group stays the
// directory's, as the kernel would have made it.
func (g *Gate) Claim(ctx context.Context, pfd int, fd int) syscall.Errno {
	if !g.ChownToCaller {
		return 0
	}
	c := caller(ctx)
	if !guard.Claims(c.Uid, c.Gid) {
		return 0
	}
	var pst unix.Stat_t
	setGID := dirfd.Fstat(pfd, &pst) == nil && pst.Mode&syscall.S_ISGID != 0
	uid, gid := guard.NewOwner(c.Uid, c.Gid, setGID)
	return dirfd.Errno(dirfd.Chown(fd, uid, gid))
}

// HandsOver reports whether an object the caller makes is the caller's to
// own, not the daemon's (guard.HandsOver).
func (g *Gate) HandsOver(ctx context.Context) bool {
	return guard.HandsOver(g.ChownToCaller, caller(ctx).Uid)
}

// HeldByOther refuses op (a rename over name in dir, an unlink of it) while
// another owner holds l, the lock of the file name leads to. Like a
// conflicting open, it waits briefly for a release already on its way
// (Patience).
func (g *Gate) HeldByOther(ctx context.Context, op string, dir Place, name string, l guard.FileLock) syscall.Errno {
	if !l.Held {
		return 0
	}
	me := g.Owner(ctx)
	if holder, other := g.Names.Table.WaitOthers(ctx, l.Key, me, g.Patience()); other {
		return g.RefuseHeld(ctx, op, dir, name, l.Key, holder)
	}
	return 0
}

// MetaHeldByOther refuses op (a chmod, chown or utimens of n, whose
// verified object fd holds) while another owner writes the file: the
// commit of that write compares the file's times with those it observed,
// and would take the change for one from outside (the writer's close
// would get EBUSY and its bytes a conflict copy), and the temp that
// becomes the file does not carry it. The owner writing the file may
// (fusefs's Setattr applies the change to its temp too).
func (g *Gate) MetaHeldByOther(ctx context.Context, op string, n Place, fd int) syscall.Errno {
	return g.HeldByOther(ctx, op, n, "", g.Names.LockOfFd(fd))
}

// DenyDirRename refuses renaming name in dir (whose verified fd is pfd) to
// newRel, the workspace path it gets, when the move could release a
// credential or plant a protected path: a directory judged by what it
// holds, a symlink renamed to a protected prefix (guard.DirRename). The
// name itself, when it is not a directory, is judged by prepare.
//
// rel is the name's workspace path now. A scan needs nsMu held
// exclusively through the rename (fusefs's Node.Rename), so that no name
// enters the tree scanned before the rename is done: without it
// (exclusive false), again says to come back with it.
func (g *Gate) DenyDirRename(ctx context.Context, dir Place, pfd int, name, rel, newRel string, exclusive bool) (errno syscall.Errno, again bool) {
	found, again, err := g.Guard.DirRename(pfd, name, rel, newRel, exclusive, g.Hidden)
	switch {
	case again:
		return 0, true
	case isEscape(err):
		return g.Refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve), false // a mount point, or swapped
	case err != nil:
		return dirfd.Errno(err), false
	case found.Path != "" && found.Protected:
		return g.refuseRel(ctx, "rename", found.Path, errcode.ProtectedPathDenied, RuleProtected), false
	case found.Path != "":
		return g.refuseCredential(ctx, "rename", found.Path, found.Path), false
	case found.Unscanned:
		return g.refuseRel(ctx, "rename", rel, errcode.CredentialPathDenied, RuleCredentialUnscanned), false
	}
	return 0, false
}

// DenyLinkMove refuses renaming name in dir (held by pfd) from oldRel to
// newRel (workspace paths, as the kernel has them now) when that would
// leave a symlink climbing out of the root, or when a directory moved
// shallower cannot be scanned whole (guard.LinkMoved). The scan needs
// nsMu held exclusively, or a link could be made in the directory between
// the scan and the rename: without it, again says to come back with it.
func (g *Gate) DenyLinkMove(ctx context.Context, dir Place, pfd int, name, oldRel, newRel string, exclusive bool) (_ syscall.Errno, again bool) {
	mv, again, err := guard.LinkMoved(pfd, name, oldRel, newRel, exclusive)
	switch {
	case again:
		return 0, true
	case mv.Dir && isEscape(err):
		return g.Refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve), false
	case err != nil:
		return dirfd.Errno(err), false
	case mv.Escapes:
		return g.Refuse(ctx, "rename", dir, path.Join(name, mv.Path), errcode.PathEscape, RuleEscapeSymlinkTarget), false
	case mv.Unscanned:
		return g.Refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeUnscanned), false
	}
	return 0, false
}

// Symlinks are judged by where they resolve (fusefs/guard's symlink.go
// says the rule: every target normal, climbing no higher than its
// directory is deep); what is here refuses what the rule does not let
// through.

// DenySymlink refuses a symlink to target made at name in dir, whose
// workspace path is dirRel (guard.Guard.JudgeSymlink): a target that
// escapes (PATH_ESCAPE), a credential target (the audit line names the
// glob that denies the target), a link at a protected directory prefix
// (PROTECTED_PATH_DENIED).
func (g *Gate) DenySymlink(ctx context.Context, dir Place, dirRel, name, target string) syscall.Errno {
	rel := Join(dirRel, name)
	switch rule, matched := g.Guard.JudgeSymlink(g.RootFd, dirRel, rel, target, g.Hidden); rule {
	case guard.SymlinkEscapes:
		return g.Refuse(ctx, "symlink", dir, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	case guard.SymlinkCredential:
		return g.refuseCredential(ctx, "symlink", rel, matched)
	case guard.SymlinkPlants:
		return g.refuseRel(ctx, "symlink", rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// DenyLinkTarget refuses op when the symlink held by fd (an O_PATH fd of
// the verified link) would climb out of the root from a directory depth
// levels deep: a hard link of a symlink gives it a new directory to
// resolve from.
func (g *Gate) DenyLinkTarget(ctx context.Context, op string, dir Place, name string, fd, depth int) syscall.Errno {
	ok, err := guard.LinkFdStaysInside(fd, depth)
	if err != nil {
		return dirfd.Errno(err)
	}
	if !ok {
		return g.Refuse(ctx, op, dir, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	return 0
}

// DenyTarget refuses reading target, the target of symlink n in a
// directory depth levels below the root (-1: detached), unless it is
// normal and climbs no higher than the root (guard.StaysInside).
func (g *Gate) DenyTarget(ctx context.Context, n Place, depth int, target string) syscall.Errno {
	if guard.StaysInside(depth, target) {
		return 0
	}
	return g.Refuse(ctx, "readlink", n, "", errcode.PathEscape, RuleEscapeSymlinkTarget)
}
