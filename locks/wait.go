package locks

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/realm-dev/realm/internal/lockorder"
)

// Waiting for a release on its way.
//
// The kernel sends RELEASE for a file after close(2) has returned to the
// process that closed it, so a lock freed at RELEASE is still held for a
// moment after the holder is done: a sequential writer's next step (another
// owner opening the file) would otherwise meet it. A holder that has closed
// its last descriptor marks its lease Closing. A conflicting call waits
// for the table to change (a release wakes it) and tries again: while every
// conflicting lease is closing, up to a bound meant never to be reached
// under load (Patience.Closing: for a lease whose RELEASE does not come, a
// descriptor a forked child still holds); while some is not, only a short
// grace (Patience.Grace: for a release the daemon could not see coming).

// Closing marks the lease as ending: its holder closed its last descriptor
// and its Release is on its way. It is idempotent; a released lease
// ignores it.
func (l *Lease) Closing() {
	if l == nil {
		return
	}
	t := l.t
	t.mu.Lock()
	if !l.released.Load() && !l.closing.Load() {
		l.closing.Store(true)
		l.e.closing++
		t.changedLocked()
	}
	t.mu.Unlock()
}

// Active undoes Closing: the holder uses the lease again (a write through
// a descriptor it still had, a dup the scan could not see). It costs one
// atomic load when the lease is not closing.
func (l *Lease) Active() {
	if l == nil || !l.closing.Load() {
		return
	}
	t := l.t
	t.mu.Lock()
	if l.closing.Load() && !l.released.Load() {
		l.closing.Store(false)
		l.e.closing--
		t.changedLocked()
	}
	t.mu.Unlock()
}

// draining reports whether every lease of e is closing.
func (e *Entry) draining() bool { return e.refs > 0 && e.closing == e.refs }

// changedLocked wakes the waiters of every key: a lease was taken, marked
// closing or released, or an entry moved. t.mu is held.
func (t *Table) changedLocked() {
	if t.waiters == 0 {
		return
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// Patience is how long a conflicting call waits for a conflict to end:
// Closing, while every conflicting hold is closing (its RELEASE is on its
// way); Grace, while some hold is not (a release the daemon could not see
// coming: a close it could not judge, by a process other than the opener).
// Both waits end at the first change of the table, when the call tries
// again; neither polls.
type Patience struct{ Closing, Grace time.Time }

// AcquireWait is AcquireMode, except that a conflict waits (with p, or
// until ctx is done) for the conflicting holds to be released; the error
// is then the last conflict met.
func (t *Table) AcquireWait(ctx context.Context, key Key, owner Owner, mode Mode, p Patience) (*Lease, error) {
	for {
		l, err := t.AcquireMode(key, owner, mode)
		if err == nil || !t.WaitConflict(ctx, key, owner, mode, p) {
			return l, err
		}
	}
}

// WaitConflict waits (with p, or until ctx is done) for a change of the
// leases on key that exclude owner taking it in mode. It reports whether
// the conflict may be over (none is left, or the table changed: try
// again), false when the wait ended.
func (t *Table) WaitConflict(ctx context.Context, key Key, owner Owner, mode Mode, p Patience) bool {
	return t.wait(ctx, key, p, func(e *Entry) bool {
		return e.owner != owner && (mode == Write || e.writes > 0)
	})
}

// WaitOthers reports an owner other than me that holds key, as OtherHolder
// does, after waiting (with p, or until ctx is done) for other owners'
// holds to be released.
func (t *Table) WaitOthers(ctx context.Context, key Key, me Owner, p Patience) (Owner, bool) {
	for {
		other, held := t.OtherHolder(key, me)
		if !held || !t.wait(ctx, key, p, func(e *Entry) bool { return e.owner != me }) {
			return other, held
		}
	}
}

// wait is WaitConflict with the conflicting entries those for which
// conflicts is true.
func (t *Table) wait(ctx context.Context, key Key, p Patience, conflicts func(*Entry) bool) bool {
	ch, draining, found := t.waitFor(key, conflicts)
	if !found {
		return true
	}
	lockorder.AssertNoneHeld("a wait in the lock table")
	deadline := p.Grace
	if draining {
		deadline = p.Closing
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	return t.sleep(ctx, ch, timer.C) == nil
}

// waitFor looks at the entries on key that conflict (by conflicts). If
// there are some (found), it registers a waiter and returns the channel
// the next change closes, and whether they are all draining. A registered
// waiter must call sleep.
func (t *Table) waitFor(key Key, conflicts func(*Entry) bool) (ch <-chan struct{}, draining, found bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	draining = true
	for _, e := range t.entries[key] {
		if conflicts(e) {
			found = true
			draining = draining && e.draining()
		}
	}
	if !found {
		return nil, false, false
	}
	t.waiters++
	return t.changed, draining, true
}

var errWaitEnded = errors.New("locks: wait ended")

// sleep waits for ch (a change), ctx or deadline, and unregisters the waiter.
func (t *Table) sleep(ctx context.Context, ch <-chan struct{}, deadline <-chan time.Time) error {
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = errWaitEnded
	case <-deadline:
		err = errWaitEnded
	}
	t.mu.Lock()
	t.waiters--
	t.mu.Unlock()
	return err
}

// How long a conflicting open (or rename, unlink, metadata change) waits
// for another owner's release. The kernel sends RELEASE after close(2)
// has returned, so a sequential writer's next step would meet the lock
// its last one let go of. A hold whose opener closed its last descriptor
// is closing (fusefs/writeproto), and a conflicting call waits for it to
// be released, woken by the release (AcquireWait), up to ReleaseWait: a
// bound for a hold whose RELEASE does not come (one the daemon took for
// closed while a descriptor of it lives on: a forked child's, or a dup
// beside an idle write handle), never reached by load. A hold not known
// to be closing is waited for only ReleaseGrace (a close the daemon
// could not judge, by another process than the opener), then EBUSY.
const (
	ReleaseWait  = 2 * time.Second
	ReleaseGrace = 250 * time.Millisecond
)

// PatienceNow is the wait of a conflicting call that starts now.
func PatienceNow() Patience {
	now := time.Now()
	return Patience{Closing: now.Add(ReleaseWait), Grace: now.Add(ReleaseGrace)}
}

// ModeFor is the lock an open with flags takes: an append without
// O_TRUNC shares the file with other owners' appends (they go into the
// file in place, each whole); every other write excludes other owners.
func ModeFor(flags uint32) Mode {
	if flags&syscall.O_APPEND != 0 && flags&syscall.O_TRUNC == 0 {
		return Append
	}
	return Write
}
