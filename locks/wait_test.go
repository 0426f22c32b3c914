package locks

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// waiting blocks until n goroutines wait in t (an event: the table's own
// count), so a test orders its release after the wait began.
func waiting(t *Table, n int) {
	for {
		t.mu.Lock()
		w := t.waiters
		t.mu.Unlock()
		if w >= n {
			return
		}
		runtime.Gosched()
	}
}

// long waits an hour for closing holds and not at all for others.
func long() Patience { return Patience{Closing: time.Now().Add(time.Hour)} }

func isConflict(err error) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.LockConflict
}

// TestAcquireWaitFailsAtOnceForAWriter: a holder that has not closed is a
// conflict at once, however long the limit.
func TestAcquireWaitFailsAtOnceForAWriter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		held, want Mode
	}{
		{"write over write", Write, Write},
		{"write over append", Append, Write},
		{"append over write", Write, Append},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			k := Key{1, 2}
			if _, err := tab.AcquireMode(k, "a", tt.held); err != nil {
				t.Fatal(err)
			}
			if _, err := tab.AcquireWait(context.Background(), k, "b", tt.want, long()); !isConflict(err) {
				t.Fatalf("AcquireWait = %v, want LOCK_CONFLICT at once", err)
			}
			if _, held := tab.WaitOthers(context.Background(), k, "b", long()); !held {
				t.Fatal("WaitOthers: a holds the key, want held")
			}
		})
	}
}

// TestAcquireWaitForClosing: a conflict with a closing lease waits for its
// release and then takes the lock; WaitOthers likewise reports free.
func TestAcquireWaitForClosing(t *testing.T) {
	for _, others := range []bool{false, true} {
		tab := NewTable()
		k := Key{1, 2}
		a, err := tab.Acquire(k, "a")
		if err != nil {
			t.Fatal(err)
		}
		a.Closing()
		a.Closing() // idempotent
		done := make(chan error, 1)
		go func() {
			if others {
				if o, held := tab.WaitOthers(context.Background(), k, "b", long()); held {
					done <- errors.New("WaitOthers: still held by " + string(o))
					return
				}
				done <- nil
				return
			}
			l, err := tab.AcquireWait(context.Background(), k, "b", Write, long())
			if err == nil && l.Owner() != "b" {
				err = errors.New("lease of the wrong owner")
			}
			done <- err
		}()
		waiting(tab, 1)
		a.Release()
		if err := <-done; err != nil {
			t.Fatalf("others=%v: %v", others, err)
		}
	}
}

// TestAcquireWaitEnds: a closing lease that is not released ends the wait
// with a conflict when the limit passes or the context ends, and a lease
// the owner takes again while a waiter waits makes it fail at once.
func TestAcquireWaitEnds(t *testing.T) {
	k := Key{1, 2}
	setup := func() (*Table, *Lease) {
		tab := NewTable()
		a, err := tab.Acquire(k, "a")
		if err != nil {
			t.Fatal(err)
		}
		a.Closing()
		return tab, a
	}

	tab, _ := setup()
	if _, err := tab.AcquireWait(context.Background(), k, "b", Write, Patience{}); !isConflict(err) {
		t.Errorf("after the limit: %v, want LOCK_CONFLICT", err)
	}

	tab, _ = setup()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tab.AcquireWait(ctx, k, "b", Write, long())
		done <- err
	}()
	waiting(tab, 1)
	cancel()
	if err := <-done; !isConflict(err) {
		t.Errorf("after the context ended: %v, want LOCK_CONFLICT", err)
	}

	tab, _ = setup()
	go func() {
		_, err := tab.AcquireWait(context.Background(), k, "b", Write, long())
		done <- err
	}()
	waiting(tab, 1)
	again, err := tab.Acquire(k, "a") // a opens the file again
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !isConflict(err) {
		t.Errorf("after the holder took the lock again: %v, want LOCK_CONFLICT", err)
	}
	again.Release()

	// A closing lease used again (Active) ends a wait likewise.
	tab, a := setup()
	go func() {
		_, err := tab.AcquireWait(context.Background(), k, "b", Write, long())
		done <- err
	}()
	waiting(tab, 1)
	a.Active()
	if err := <-done; !isConflict(err) {
		t.Errorf("after the holder's lease was active again: %v, want LOCK_CONFLICT", err)
	}
	a.Closing()
	go func() {
		_, err := tab.AcquireWait(context.Background(), k, "b", Write, long())
		done <- err
	}()
	waiting(tab, 1)
	a.Release()
	if err := <-done; err != nil {
		t.Errorf("after closing again and the release: %v", err)
	}
	tab.mu.Lock()
	if tab.waiters != 0 {
		t.Errorf("%d waiters left registered", tab.waiters)
	}
	tab.mu.Unlock()
}

// TestAcquireWaitAppenders: appenders share; a writer waits only for
// appenders that are all closing.
func TestAcquireWaitAppenders(t *testing.T) {
	tab := NewTable()
	k := Key{1, 2}
	a, _ := tab.AcquireMode(k, "a", Append)
	c, err := tab.AcquireWait(context.Background(), k, "c", Append, long())
	if err != nil {
		t.Fatalf("a second appender: %v", err)
	}
	a.Closing()
	if _, err := tab.AcquireWait(context.Background(), k, "b", Write, long()); !isConflict(err) {
		t.Fatalf("a writer beside an appender still appending: %v, want LOCK_CONFLICT at once", err)
	}
	c.Closing()
	done := make(chan error, 1)
	go func() {
		_, err := tab.AcquireWait(context.Background(), k, "b", Write, long())
		done <- err
	}()
	waiting(tab, 1)
	a.Release()
	c.Release()
	if err := <-done; err != nil {
		t.Fatalf("a writer after both appenders closed: %v", err)
	}
}

// TestClosingAfterRelease: marking a released lease does nothing, and a
// closed lease's release leaves its entry's count right.
func TestClosingAfterRelease(t *testing.T) {
	tab := NewTable()
	k := Key{1, 2}
	a, _ := tab.Acquire(k, "a")
	b, _ := tab.Acquire(k, "a")
	a.Closing()
	a.Release()
	a.Closing()
	if e := b.Shared(); e.closing != 0 || e.refs != 1 {
		t.Fatalf("entry closing=%d refs=%d, want 0 and 1", e.closing, e.refs)
	}
	var nilLease *Lease
	nilLease.Closing()
}

// TestAcquireWaitGrace: a holder that is not closing is waited for only
// within the grace, and its release ends the wait at once.
func TestAcquireWaitGrace(t *testing.T) {
	tab := NewTable()
	k := Key{1, 2}
	a, _ := tab.Acquire(k, "a")
	done := make(chan error, 1)
	go func() {
		_, err := tab.AcquireWait(context.Background(), k, "b", Write, Patience{Grace: time.Now().Add(time.Hour)})
		done <- err
	}()
	waiting(tab, 1)
	a.Release()
	if err := <-done; err != nil {
		t.Fatalf("a release within the grace: %v", err)
	}
}

// TestActiveAfterRelease: a released lease that was closing leaves the
// entry's count alone when it is used again.
func TestActiveAfterRelease(t *testing.T) {
	tab := NewTable()
	k := Key{1, 2}
	a, _ := tab.Acquire(k, "a")
	b, _ := tab.Acquire(k, "a")
	a.Closing()
	a.Release()
	a.Active()
	if e := b.Shared(); e.closing != 0 || e.refs != 1 {
		t.Fatalf("entry closing=%d refs=%d, want 0 and 1", e.closing, e.refs)
	}
}
