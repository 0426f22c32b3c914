package fusefs

import (
	"testing"
	"time"

	"github.com/realm-dev/realm/procinfo"
)

// TestWriteWatch drives writeWatch.out with sequences of samples of the
// last writer, each at a time since its last WRITE was answered: the watch
// must say "out" at the sample named, and not before.
func TestWriteWatch(t *testing.T) {
	type sample struct {
		since time.Duration
		state procinfo.WriterState
		ticks uint64
	}
	ms := time.Millisecond
	busy, fuse, idle, gone, unknown := procinfo.WriterBusy, procinfo.WriterOnFUSE, procinfo.WriterIdle, procinfo.WriterGone, procinfo.WriterUnknown
	for _, tc := range []struct {
		name    string
		samples []sample
		out     int // the first sample that says the writer is out
	}{
		{"asleep elsewhere, past the gap", []sample{{0, idle, 5}, {11 * ms, idle, 5}}, 1},
		{"within the gap only its user time counts", []sample{{1 * ms, idle, 5}, {5 * ms, gone, 5}, {10 * ms, gone, 5}}, 2},
		{"runnable, not back in its code: waits past 100 ms",
			[]sample{{0, busy, 7}, {50 * ms, busy, 7}, {150 * ms, busy, 7}, {900 * ms, busy, 7}, {writeGap + writeStall, busy, 7}}, 4},
		{"runnable and back in its code", []sample{{0, busy, 7}, {20 * ms, busy, 7}, {30 * ms, busy, 8}}, 2},
		{"its user time grew within the gap", []sample{{0, busy, 7}, {2 * ms, busy, 9}}, 1},
		{"asleep on FUSE: one gap more", []sample{{0, busy, 3}, {12 * ms, fuse, 3}, {20 * ms, fuse, 3}, {22 * ms, fuse, 3}}, 3},
		{"asleep on FUSE, back in its code", []sample{{0, busy, 3}, {12 * ms, fuse, 3}, {13 * ms, fuse, 4}}, 2},
		{"a page of its buffer read in (busy)", []sample{{0, busy, 1}, {500 * ms, busy, 1}, {writeGap + writeStall + ms, busy, 1}}, 2},
		{"gone", []sample{{0, busy, 1}, {15 * ms, gone, 0}}, 1},
		{"unreadable", []sample{{12 * ms, unknown, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ww writeWatch
			for i, s := range tc.samples {
				out := ww.out(s.since, procinfo.WriterSample{State: s.state, UserTicks: s.ticks})
				if out != (i == tc.out) {
					t.Fatalf("sample %d (%v, %v, %d ticks): out %v, want out first at sample %d", i, s.since, s.state, s.ticks, out, tc.out)
				}
				if out {
					return
				}
			}
			t.Fatal("never out")
		})
	}
}
