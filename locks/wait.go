package locks

import (
	"context"
	"errors"
	"time"
)

// Waiting for a release on its way.
//
// The kernel sends RELEASE for a file after close(2) has returned to the
// process that closed it, so a lock freed at RELEASE is still held for a
// moment after the holder is done: a sequential writer's next step (another
// owner opening the file) would otherwise meet it. A holder that has closed
// its last descriptor marks its lease Closing; a conflicting acquire waits
// for exactly those leases to go, woken by their Release, and fails at once
// when any conflicting lease is not closing (its holder still writes). The
// wait is an event, not a time: limit only bounds it for a lease marked
// closing whose RELEASE never comes (a forked child still holding the
// open file description).

// Closing marks the lease as ending: its holder closed its last descriptor
// and its Release is on its way. It is idempotent; a released lease
// ignores it.
func (l *Lease) Closing() {
	if l == nil {
		return
	}
	t := l.t
	t.mu.Lock()
	if !l.released.Load() && !l.closing {
		l.closing = true
		l.marked.Store(true)
		l.e.closing++
		t.changedLocked()
	}
	t.mu.Unlock()
}

// Active undoes Closing: the holder uses the lease again (a write through
// a descriptor it still had, a dup the scan could not see). It costs one
// atomic load when the lease is not closing.
func (l *Lease) Active() {
	if l == nil || !l.marked.Load() {
		return
	}
	t := l.t
	t.mu.Lock()
	if l.closing {
		l.closing = false
		l.marked.Store(false)
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

// AcquireWait is AcquireMode, except that a conflict with leases that are
// all closing waits for them to be released (until ctx is done or the
// deadline) instead of failing; the error is then the last conflict met.
func (t *Table) AcquireWait(ctx context.Context, key Key, owner Owner, mode Mode, deadline time.Time) (*Lease, error) {
	for {
		l, err := t.AcquireMode(key, owner, mode)
		if err == nil || !t.WaitConflict(ctx, key, owner, mode, deadline) {
			return l, err
		}
	}
}

// WaitConflict waits while every lease on key that excludes owner taking
// it in mode is closing, until one is released, ctx is done or the
// deadline. It reports whether the conflict may be over (none is left, or
// one went: try again), false when a conflicting lease is not closing or
// the wait ended.
func (t *Table) WaitConflict(ctx context.Context, key Key, owner Owner, mode Mode, deadline time.Time) bool {
	return t.wait(ctx, key, deadline, func(e *Entry) bool {
		return e.owner != owner && (mode == Write || e.writes > 0)
	})
}

// WaitOthers reports an owner other than me that holds key, as OtherHolder
// does, after waiting (until ctx is done or the deadline) for other
// owners' leases that are all closing to be released.
func (t *Table) WaitOthers(ctx context.Context, key Key, me Owner, deadline time.Time) (Owner, bool) {
	for {
		other, held := t.OtherHolder(key, me)
		if !held || !t.wait(ctx, key, deadline, func(e *Entry) bool { return e.owner != me }) {
			return other, held
		}
	}
}

// wait is WaitConflict with the conflicting entries those for which
// conflicts is true.
func (t *Table) wait(ctx context.Context, key Key, deadline time.Time, conflicts func(*Entry) bool) bool {
	ch, wait := t.waitFor(key, conflicts)
	if !wait {
		return ch == nil
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	return t.sleep(ctx, ch, timer.C) == nil
}

// waitFor looks at the entries on key that conflict (by conflicts): if
// there are some and all are draining, it registers a waiter and returns
// the channel a change closes, and true; if some conflicting entry still
// writes, a non-nil channel and false; if none conflicts any more, nil
// and false. A registered waiter must call sleep.
func (t *Table) waitFor(key Key, conflicts func(*Entry) bool) (<-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	for _, e := range t.entries[key] {
		if !conflicts(e) {
			continue
		}
		found = true
		if !e.draining() {
			return closedChan, false
		}
	}
	if !found {
		return nil, false
	}
	t.waiters++
	return t.changed, true
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
