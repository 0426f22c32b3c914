package ratelog

import (
	"testing"
	"time"
)

// TestAllow: burst lines of a kind a window, the rest left out and said by
// the next line written; kinds are counted apart.
func TestAllow(t *testing.T) {
	l := New(3, time.Second)
	t0 := time.Unix(1000, 0)
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
		{"a", time.Second, true, 2}, // a new window: says the two left out
		{"a", time.Second + 1, true, 0},
	} {
		ok, n := l.Allow(s.kind, t0.Add(s.at))
		if ok != s.ok || n != s.leftOut {
			t.Errorf("step %d (%s at %v): %v, %d left out; want %v, %d", i, s.kind, s.at, ok, n, s.ok, s.leftOut)
		}
	}
}
