package fusefs

import (
	"context"
	"syscall"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/locks"
)

// Descriptors per owner (fusefs/fdbudget holds the arithmetic and the
// counts). Every descriptor the daemon holds on an owner's behalf is
// charged to that owner, and released when closed:
//
//   - each open file or directory handle: one (its fd; a write handle's
//     slot, its fds are its write's), charged by fdbudget.CountingFS on a
//     mount made by FS.Mount;
//   - each write in progress (pendingWrite): pendingFds, the most it
//     holds (the file, the temp, two directory fds, an append fd);
//   - each record-lock or flock locker's OFD fd (reclock.go): one, and
//     the lock set's anchor one more, to the owner whose lock made it.
//
// The bound is checked by the ops themselves (Node.Open, Node.Create,
// Node.OpendirHandle call FS.admitOpen), where the refusal knows its path.
// The refusal is EMFILE (ENOLCK for a lock), audited RESOURCE_LIMIT once
// per burst (the first refusal since the owner could last take one more).
//
// Each check resolves the caller's owner (procinfo.Resolver: a cached answer
// per thread, one ppoll of its pidfd; before Linux 6.9 a read of
// /proc/TID/stat), which a plain read open did not do before. The count
// after the answer takes the owner the check resolved for the same thread
// (a thread has one open in flight), so an open resolves its owner once.

// pendingFds is what a write in progress may hold: base, temp, tempDir,
// fileDir and an append fd.
const pendingFds = 5

// fdCounts is the mount's fdbudget.Counts, under the names the write path
// and the lockers call it by.
type fdCounts struct{ fdbudget.Counts }

// bounded reports whether anything is counted.
func (c *fdCounts) bounded() bool { return c.Bounded() }

// charge charges n descriptors to o, admitted before (FS.admitOpen).
func (c *fdCounts) charge(o locks.Owner, n int) { c.Charge(o, n) }

// release gives n descriptors of o back.
func (c *fdCounts) release(o locks.Owner, n int) { c.Release(o, n) }

// openNeed is what an open with flags may take: its handle, and a write
// in progress if it writes.
func openNeed(flags uint32) int {
	if writeengine.WriteFlags(flags) {
		return 1 + pendingFds
	}
	return 1
}

// admitOpen refuses an open of name in n (n itself when name is "") by a
// caller whose owner o may not take need more descriptors; o "" resolves
// the caller's owner here (a resolution polls the caller's pidfd: a
// request that needs the owner again passes the one it has). It charges
// nothing: the open's answer does (fdbudget.CountingFS), and a write's
// start (openShared); need is what both may take.
func (f *FS) admitOpen(ctx context.Context, o locks.Owner, op string, n *Node, name string, need int) syscall.Errno {
	if !f.fds.bounded() {
		return 0
	}
	if o == "" {
		o = f.owner(ctx)
	}
	f.fds.Checked(caller(ctx).Pid, o)
	return f.chargeOrRefuse(ctx, o, op, n, name, need, 0, syscall.EMFILE)
}

// chargeOrRefuse charges o with charge descriptors if it may take need
// (>= charge); else it refuses op with errno, audited RESOURCE_LIMIT on
// the first refusal of o's burst.
func (f *FS) chargeOrRefuse(ctx context.Context, o locks.Owner, op string, n *Node, name string, need, charge int, errno syscall.Errno) syscall.Errno {
	r, first := f.fds.Take(o, need, charge)
	if r == fdbudget.None {
		return 0
	}
	if !first {
		return errno
	}
	return f.refuseAs(ctx, op, n, name, errcode.ResourceLimit, errno, fdRule(r))
}

// fdRule is the rule id of a refusal by the descriptor budget.
func fdRule(r fdbudget.Refusal) string {
	if r == fdbudget.PerOwner {
		return RuleResourceLimit
	}
	return RuleFdBudget
}
