package ratelog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAllow: burst lines of a kind in a window's span, the rest left out
// and said by the next line written; kinds are counted apart.
func TestAllow(t *testing.T) {
	const ms = time.Millisecond
	l := New(3, time.Second)
	t0 := time.Now()
	type step struct {
		kind    string
		at      time.Duration
		ok      bool
		leftOut int64
	}
	for i, s := range []step{
		{"a", 0, true, 0},
		{"a", 10 * time.Millisecond, true, 0},
		{"b", 20 * time.Millisecond, true, 0},
		{"a", 30 * time.Millisecond, true, 0},
		{"a", 40 * time.Millisecond, false, 0},
		{"a", 50 * time.Millisecond, false, 0},
		{"b", 60 * time.Millisecond, true, 0},
		{"a", time.Second, true, 2},           // the first line a window old: says the two left out
		{"a", time.Second + 1, false, 0},      // the second one is not yet
		{"a", time.Second + 10*ms, true, 1},   // now it is
		{"a", time.Second + 29*ms, false, 0},  // the third one is not yet
		{"b", time.Second + 60*ms, true, 0},   // b's third line: within its burst
		{"a", 2*time.Second + 30*ms, true, 1}, // a window after the line it waits out
	} {
		ok, n := l.Allow(s.kind, t0.Add(s.at))
		if ok != s.ok || n != s.leftOut {
			t.Errorf("step %d (%s at %v): %v, %d left out; want %v, %d", i, s.kind, s.at, ok, n, s.ok, s.leftOut)
		}
	}
}

// TestAllowAcrossTheClocksTurn: a burst writes Burst lines in any
// window's span, wherever it falls (CI, 2026-12-05: 300 failed commits
// just before and after a minute's turn logged 40 lines where the bound is
// 20, from a limiter whose windows were the clock's minutes).
func TestAllowAcrossTheClocksTurn(t *testing.T) {
	for _, start := range []time.Duration{0, time.Minute - 150*time.Millisecond, time.Hour} {
		l := New(20, time.Minute)
		first := l.epoch.Add(start)
		written, leftOut := 0, int64(0)
		for i := range 300 {
			if ok, n := l.Allow("commit failed", first.Add(time.Duration(i)*time.Millisecond)); ok {
				written++
				leftOut += n
			}
		}
		if written != 20 {
			t.Errorf("300 lines over 0.3 s from %v: %d written, want 20", start, written)
		}
		ok, n := l.Allow("commit failed", first.Add(time.Minute))
		if !ok || leftOut+n != 280 {
			t.Errorf("a window after the first line from %v: %v, %d left out; want true, 280", start, ok, leftOut+n)
		}
	}
}

// TestAllowConcurrent: callers racing at one instant write the burst and
// no more, and every line left out is said once.
func TestAllowConcurrent(t *testing.T) {
	const burst, callers, each = 5, 8, 1000
	l := New(burst, time.Hour)
	now := time.Now()
	var written, leftOut atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if ok, n := l.Allow("k", now); ok {
					written.Add(1)
					leftOut.Add(n)
				}
			}
		}()
	}
	wg.Wait()
	if written.Load() != burst {
		t.Errorf("%d lines written at one instant, want %d", written.Load(), burst)
	}
	ok, n := l.Allow("k", now.Add(time.Hour))
	if !ok || leftOut.Load()+n != callers*each-burst {
		t.Errorf("an hour later: %v; %d left out said, want %d", ok, leftOut.Load()+n, callers*each-burst)
	}
}
