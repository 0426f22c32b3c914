// Package admit is the mount's audited admission: each check of an
// operation that the guard (fusefs/guard) decides, answered as the mount
// answers it, with the errno the caller gets and the audit line of a
// refusal. fusefs's adapters decode a request, make one call here and
// answer what it returns.
//
// The decisions are fusefs/guard's, as functions of the policy,
// workspace paths and identities; what is here builds the workspace path
// of the place a check is about (Place: fusefs's node, whose path comes
// from go-fuse's tree, built only when an audit line is written or the
// policy must be asked), asks the guard, and audits and answers what it
// refuses. It also charges the descriptor budget (fusefs/fdbudget),
// waits for and refuses another owner's write lock in names' operations,
// gives a new object its mode and owner, and sweeps the temps a crash
// left (the mount-time scan). It knows nothing of the node tree beyond
// Place and Object, and reaches BACKING only through fusefs/dirfd, on the
// fds it is handed.
//
// Credential denial. The policy's matcher is asked about the canonical
// workspace-relative path of the object an operation touches: the node's
// own place in the tree, which for an object reached through a symlink is
// the symlink's target. Escape checks (dirfd, verify, StaysInside) come
// first, so an escaping credential path reports PATH_ESCAPE.
package admit

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/requestnotes"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// Place is where a check's path comes from: a directory or an object of
// the mount (fusefs's Node). Rel is the workspace path of name in it (of
// the place itself for ""), built in memory only, never passed to a
// system call; a Place is asked only when a path is needed.
type Place interface {
	Rel(name string) string
}

// Object is a node an operation acts on itself: its place, the backing
// file it stands for (generation included) and whether it is a directory.
type Object interface {
	Place
	FileID() locks.FileID
	IsDir() bool
}

// Gate is one mount's admission: what its checks ask and where their
// refusals go. Set its fields before the mount serves; they are not
// changed after.
type Gate struct {
	// Guard decides: the policy, the identity sets, the made set.
	Guard *guard.Guard
	// Audit receives one line per refusal; nil writes none.
	Audit *audit.Auditor
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// ChownToCaller gives each created object to the calling uid/gid.
	ChownToCaller bool
	// Names looks names up in the mount's lock table under its commitMu.
	Names guard.NameLocks
	// Patience is the wait, starting now, of a call that meets another
	// owner's write lock, for a release already on its way.
	Patience func() locks.Patience
	// Fds are the descriptors charged per owner.
	Fds *fdbudget.Counts
	// Owner names the lock owner of the process that made the request.
	Owner func(ctx context.Context) locks.Owner
	// Umasks are the callers' umasks the mount's raw filesystem noted.
	Umasks *requestnotes.Notes
	// RootFd is BACKING's root; Boundary tells a directory fd's path
	// beneath it as the kernel has it now.
	RootFd   int
	Boundary *dirfd.Root
	// Hidden reports the names the mount never shows: realm's temps.
	Hidden func(name string) bool
	// IsOwnTemp reports whether a temp is one this mount is using (the
	// write engine's), which the sweep of a crash's temps leaves alone.
	IsOwnTemp func(name string) bool
}

// Join is name in the directory whose workspace path is dir.
func Join(dir, name string) string {
	switch {
	case name == "":
		return dir
	case dir == "":
		return name
	default:
		return dir + "/" + name
	}
}

// DirRel is the workspace path of directory dir, whose verified fd is
// pfd, as the kernel has it now (dirfd.Root.Rel): the checks of a name an
// operation makes use it, under nsMu. The tree of names go-fuse keeps
// (Place.Rel) learns of a rename only after Rename returns, and a name
// made in the moved directory meanwhile would be judged at its old place.
// Where the kernel gives no path (longer than it gives), the tree's.
func (g *Gate) DirRel(dir Place, pfd int) string {
	if rel, err := g.Boundary.Rel(pfd); err == nil {
		return rel
	}
	return dir.Rel("")
}

// Refuse audits a refusal of op on name in p, by the rule id rule (one of
// the Rule* constants), and returns its errno.
func (g *Gate) Refuse(ctx context.Context, op string, p Place, name string, code errcode.Code, rule string) syscall.Errno {
	if g.Audit == nil {
		return code.Errno()
	}
	return g.refuseRel(ctx, op, p.Rel(name), code, rule)
}

// RefuseHeld refuses op on name in p because holder, another owner,
// holds the lock of key, the file's: a LOCK_CONFLICT line that names the
// holder and the process of its open that took the lock, if known (the
// table notes the opening thread, as FUSE names it).
func (g *Gate) RefuseHeld(ctx context.Context, op string, p Place, name string, key locks.Key, holder locks.Owner) syscall.Errno {
	errno := errcode.LockConflict.Errno()
	if g.Audit != nil {
		g.Audit.RecordConflict(ctx, op, p.Rel(name), errno, RuleLockOtherOwner,
			audit.Holder{Owner: string(holder), Pid: procinfo.ThreadGroup(g.Names.Table.Opener(key, holder))})
	}
	return errno
}

// RefuseAs is Refuse answering errno instead of the code's own: a
// directory moved out of BACKING is ESTALE to the mount, as a directory
// gone from an NFS server is, though what was refused is an escape.
func (g *Gate) RefuseAs(ctx context.Context, op string, p Place, name string, code errcode.Code, errno syscall.Errno, rule string) syscall.Errno {
	if g.Audit != nil {
		g.Audit.RecordRefusal(ctx, op, p.Rel(name), code, errno, rule, "")
	}
	return errno
}

// refuseRel audits a refusal of op on the workspace path rel by rule id.
func (g *Gate) refuseRel(ctx context.Context, op, rel string, code errcode.Code, rule string) syscall.Errno {
	errno := code.Errno()
	if g.Audit != nil {
		g.Audit.RecordRefusal(ctx, op, rel, code, errno, rule, "")
	}
	return errno
}

// refuseCredential audits a credential refusal of op on the workspace path
// rel. The line names the glob that denies matched (rel itself, or the
// target of a symlink being made) and where that glob was written; when no
// glob denies it, the file is a credential by its identity (guard.Guard.Creds).
func (g *Gate) refuseCredential(ctx context.Context, op, rel, matched string) syscall.Errno {
	return g.auditCredential(ctx, op, rel, matched, errcode.CredentialPathDenied.Errno())
}

// auditCredential writes refuseCredential's line with errno (ENOENT for a
// hidden entry) and returns errno.
func (g *Gate) auditCredential(ctx context.Context, op, rel, matched string, errno syscall.Errno) syscall.Errno {
	if g.Audit == nil {
		return errno
	}
	rule, source := RuleCredentialIdentity, ""
	if g.Guard.Policy != nil {
		if r, ok := g.Guard.Policy.Rule(matched); ok {
			rule, source = r.Glob, r.Source
		}
	}
	g.Audit.RecordRefusal(ctx, op, rel, errcode.CredentialPathDenied, errno, rule, source)
	return errno
}

// refuseProtect audits and answers the protect rule that refuses op on
// rel, if any.
func (g *Gate) refuseProtect(ctx context.Context, op, rel string, rule guard.ProtectRule) syscall.Errno {
	switch rule {
	case guard.ProtectedPath:
		return g.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	case guard.ProtectedIdentity:
		return g.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtectedIdentity)
	}
	return 0
}

// refuseName audits and answers the rule that refuses op on the name at
// rel, if any (guard.Guard.JudgeName, JudgeRename): the audit lines are
// refuseCredential and refuseRel by the path refused.
func (g *Gate) refuseName(ctx context.Context, op, rel string, rule guard.NameRule) syscall.Errno {
	switch rule {
	case guard.NameCredential:
		return g.refuseCredential(ctx, op, rel, rel)
	case guard.NameProtected:
		return g.refuseRel(ctx, op, rel, errcode.ProtectedPathDenied, RuleProtected)
	}
	return 0
}

// caller returns who made the request; the zero Caller if go-fuse did not say.
func caller(ctx context.Context) fuse.Caller {
	if c, ok := fuse.FromContext(ctx); ok && c != nil {
		return *c
	}
	return fuse.Caller{}
}

func isEscape(err error) bool { return errors.Is(err, dirfd.ErrEscape) }
