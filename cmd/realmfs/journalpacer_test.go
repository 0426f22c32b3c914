package main

import (
	"testing"
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
