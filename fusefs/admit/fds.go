package admit

import (
	"context"
	"syscall"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/locks"
)

// Descriptors per owner (fusefs/fdbudget holds the arithmetic and the
// counts). Every descriptor the daemon holds on an owner's behalf is
// charged to that owner, and released when closed:
//
//   - each open file or directory handle: one (its fd; a write handle's
//     slot, its fds are its write's), charged by fdbudget.CountingFS on a
//     mount made by fusefs's FS.Mount;
//   - each write in progress (the write engine's Write): PendingFds, the
//     most it holds (the file, the temp, two directory fds, an append fd);
//   - each record-lock or flock locker's OFD fd (fusefs's reclock.go):
//     one, and the lock set's anchor one more, to the owner whose lock
//     made it.
//
// The bound is checked by the ops themselves (fusefs's Node.Open,
// Node.Create, Node.OpendirHandle call AdmitOpen), where the refusal knows
// its path. The refusal is EMFILE (ENOLCK for a lock), audited
// RESOURCE_LIMIT once per burst (the first refusal since the owner could
// last take one more).
//
// Each check resolves the caller's owner (procinfo.Resolver: a cached answer
// per thread, one ppoll of its pidfd; before Linux 6.9 a read of
// /proc/TID/stat), which a plain read open did not do before. The count
// after the answer takes the owner the check resolved for the same thread
// (a thread has one open in flight), so an open resolves its owner once.

// PendingFds is what a write in progress may hold: base, temp, tempDir,
// fileDir and an append fd.
const PendingFds = 5

// AdmitOpen refuses an open of name in p (p itself when name is "") by a
// caller whose owner o may not take the descriptors the open may take: its
// handle, and a write in progress if it writes. o "" resolves the caller's
// owner here (a resolution polls the caller's pidfd: a request that needs
// the owner again passes the one it has). It charges nothing: the open's
// answer does (fdbudget.CountingFS), and a write's start (the write
// engine's Host.ChargeWrite).
func (g *Gate) AdmitOpen(ctx context.Context, o locks.Owner, op string, p Place, name string, writes bool) syscall.Errno {
	if !g.Fds.Bounded() {
		return 0
	}
	if o == "" {
		o = g.Owner(ctx)
	}
	g.Fds.Checked(caller(ctx).Pid, o)
	need := 1
	if writes {
		need += PendingFds
	}
	return g.ChargeOrRefuse(ctx, o, op, p, name, need, 0, syscall.EMFILE)
}

// ChargeOrRefuse charges o with charge descriptors if it may take need
// (>= charge); else it refuses op on name in p with errno, audited
// RESOURCE_LIMIT on the first refusal of o's burst.
func (g *Gate) ChargeOrRefuse(ctx context.Context, o locks.Owner, op string, p Place, name string, need, charge int, errno syscall.Errno) syscall.Errno {
	r, first := g.Fds.Take(o, need, charge)
	if r == fdbudget.None {
		return 0
	}
	if !first {
		return errno
	}
	return g.RefuseAs(ctx, op, p, name, errcode.ResourceLimit, errno, fdRule(r))
}

// fdRule is the rule id of a refusal by the descriptor budget.
func fdRule(r fdbudget.Refusal) string {
	if r == fdbudget.PerOwner {
		return RuleResourceLimit
	}
	return RuleFdBudget
}
