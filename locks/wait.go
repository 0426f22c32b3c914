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
// all closing waits for them to be released (until ctx is done or limit
// has passed) instead of failing; the conflict error is the last one met.
func (t *Table) AcquireWait(ctx context.Context, key Key, owner Owner, mode Mode, limit time.Duration) (*Lease, error) {
	var deadline <-chan time.Time
	for {
		l, err := t.AcquireMode(key, owner, mode)
		if err == nil {
			return l, nil
		}
		ch, wait := t.waitFor(key, func(e *Entry) bool {
			return e.owner != owner && (mode == Write || e.writes > 0)
		})
		if !wait {
			if ch == nil {
				continue // released between the try and the look
			}
			return nil, err
		}
		if deadline == nil {
			timer := time.NewTimer(limit)
			defer timer.Stop()
			deadline = timer.C
		}
		if werr := t.sleep(ctx, ch, deadline); werr != nil {
			return nil, err
		}
	}
}

// WaitOthers reports an owner other than me that holds key, as OtherHolder
// does, after waiting (until ctx is done or limit has passed) for other
// owners' leases that are all closing to be released.
func (t *Table) WaitOthers(ctx context.Context, key Key, me Owner, limit time.Duration) (Owner, bool) {
	var deadline <-chan time.Time
	for {
		other, held := t.OtherHolder(key, me)
		if !held {
			return "", false
		}
		ch, wait := t.waitFor(key, func(e *Entry) bool { return e.owner != me })
		if !wait {
			if ch == nil {
				continue
			}
			return other, true
		}
		if deadline == nil {
			timer := time.NewTimer(limit)
			defer timer.Stop()
			deadline = timer.C
		}
		if t.sleep(ctx, ch, deadline) != nil {
			return t.OtherHolder(key, me)
		}
	}
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
