package writeproto

import (
	"testing"
	"time"
)

func TestSyncPlan(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		asked, full, emptyOrdered bool
		temp, dir                 bool
	}{
		{"fsync(2) asked", true, false, false, true, true},
		{"fsync(2) asked of an empty file on ext4", true, true, true, true, true},
		{"full durability", false, true, false, true, true},
		{"full durability, an empty file on ext4: the rename orders the data", false, true, true, false, true},
		{"atomic durability", false, false, false, false, false},
		{"atomic durability, an empty file on ext4", false, false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if temp, dir := SyncPlan(tc.asked, tc.full, tc.emptyOrdered); temp != tc.temp || dir != tc.dir {
				t.Fatalf("SyncPlan = temp %v, dir %v; want %v, %v", temp, dir, tc.temp, tc.dir)
			}
		})
	}
	if !ReplacesEmpty(0, 1) || ReplacesEmpty(1, 1) || ReplacesEmpty(0, 2) {
		t.Error("ReplacesEmpty: an empty file with one name, only")
	}
}

// TestWriteWatch drives WriteWatch.Out with sequences of samples of the
// last writer, each at a time since its last WRITE was answered: the watch
// must say "out" at the sample named, and not before.
func TestWriteWatch(t *testing.T) {
	type sample struct {
		since time.Duration
		state WriterState
		ticks uint64
	}
	ms := time.Millisecond
	busy, fuse, elsewhere := WriterBusy, WriterOnFUSE, WriterElsewhere
	for _, tc := range []struct {
		name    string
		samples []sample
		out     int // the first sample that says the writer is out
	}{
		{"asleep elsewhere, past the gap", []sample{{0, elsewhere, 5}, {11 * ms, elsewhere, 5}}, 1},
		{"within the gap only its user time counts", []sample{{1 * ms, elsewhere, 5}, {5 * ms, elsewhere, 5}, {10 * ms, elsewhere, 5}}, 2},
		{"runnable, not back in its code: waits past 100 ms",
			[]sample{{0, busy, 7}, {50 * ms, busy, 7}, {150 * ms, busy, 7}, {900 * ms, busy, 7}, {WriteGap + WriteStall, busy, 7}}, 4},
		{"runnable and back in its code", []sample{{0, busy, 7}, {20 * ms, busy, 7}, {30 * ms, busy, 8}}, 2},
		{"its user time grew within the gap", []sample{{0, busy, 7}, {2 * ms, busy, 9}}, 1},
		{"asleep on FUSE: one gap more", []sample{{0, busy, 3}, {12 * ms, fuse, 3}, {20 * ms, fuse, 3}, {22 * ms, fuse, 3}}, 3},
		{"asleep on FUSE, back in its code", []sample{{0, busy, 3}, {12 * ms, fuse, 3}, {13 * ms, fuse, 4}}, 2},
		{"a page of its buffer read in (busy)", []sample{{0, busy, 1}, {500 * ms, busy, 1}, {WriteGap + WriteStall + ms, busy, 1}}, 2},
		{"gone or unreadable", []sample{{0, busy, 1}, {15 * ms, elsewhere, 0}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ww WriteWatch
			for i, s := range tc.samples {
				out := ww.Out(s.since, s.state, s.ticks)
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
