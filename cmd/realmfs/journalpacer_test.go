package main

import (
	"testing"
	"time"
)

// counter is a mount's count of requests as a test drives it: each look
// returns the next of looks, then the last for ever.
type counter struct {
	looks []uint64
	n     int
}

func (c *counter) requests() uint64 {
	v := c.looks[min(c.n, len(c.looks)-1)]
	c.n++
	return v
}

// TestPacer: pace goes on at once where no request came since its last
// look, waits (looking again after each idleFor) while the count moves,
// and does not wait where urgent says so, where the pruner stops, or
// before the mount is there.
func TestPacer(t *testing.T) {
	never := func() bool { return false }
	tests := []struct {
		name      string
		looks     []uint64
		seen      uint64
		urgent    func() bool
		stopped   bool
		wantLooks int
	}{
		{"idle since the last look", []uint64{7}, 7, never, false, 1},
		{"busy, then idle", []uint64{8, 9, 10, 10}, 7, never, false, 4},
		{"busy, urgent", []uint64{8, 9, 10}, 7, func() bool { return true }, false, 1},
		{"busy, stopped", []uint64{8, 9, 10}, 7, never, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			if tc.stopped {
				close(done)
			}
			c := &counter{looks: tc.looks}
			p := &pacer{done: done, seen: tc.seen}
			p.paceBy(c.requests)
			p.pace(tc.urgent)
			if c.n != tc.wantLooks {
				t.Errorf("%d looks at the count, want %d", c.n, tc.wantLooks)
			}
		})
	}
	var p pacer // not mounted yet: no count to look at, no wait
	p.pace(never)
}

// TestPacerMaxWait: a busy spell is waited through for maxWait, then the
// pacer goes on while it lasts, and waits again after an idle look.
func TestPacerMaxWait(t *testing.T) {
	never := func() bool { return false }
	var clock time.Time
	n := uint64(0)
	busy := func() uint64 { n++; return n } // a request between any two looks
	p := &pacer{done: make(chan struct{}), now: func() time.Time { clock = clock.Add(20 * time.Second); return clock }}
	p.paceBy(busy)
	// The spell begins at the first look (20 s on the fake clock); the
	// pacer goes on at the first look maxWait past it, the fourth (80 s).
	p.pace(never)
	if looks := n; looks != 4 {
		t.Errorf("%d looks before the pacer went on, want 4 (maxWait %v, 20 s a look)", looks, maxWait)
	}
	if p.busy.IsZero() {
		t.Error("the busy spell's start forgotten while it lasts")
	}
	n0 := n
	p.pace(never) // the spell lasts: on at once
	if n != n0+1 {
		t.Errorf("%d looks in a busy spell already waited through, want 1", n-n0)
	}
	idle := n
	p.paceBy(func() uint64 { return idle })
	p.pace(never)
	if !p.busy.IsZero() {
		t.Error("an idle look left the busy spell's start")
	}
}
