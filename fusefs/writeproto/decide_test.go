package writeproto

import (
	"testing"
	"time"
)

func TestSyncPlan(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		asked, full, emptyOrdered, newName bool
		temp, dir                          bool
	}{
		{"fsync(2) asked", true, false, false, false, true, true},
		{"fsync(2) asked of an empty file on ext4", true, true, true, false, true, true},
		{"fsync(2) asked of a new file, atomic: its data, not its name", true, false, false, true, true, false},
		{"fsync(2) asked of a new file, full: the close's promise too", true, true, false, true, true, true},
		{"full durability", false, true, false, false, true, true},
		{"full durability, a new file", false, true, false, true, true, true},
		{"full durability, an empty file on ext4: the rename orders the data", false, true, true, false, false, true},
		{"atomic durability", false, false, false, false, false, false},
		{"atomic durability, a new file", false, false, false, true, false, false},
		{"atomic durability, an empty file on ext4", false, false, true, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if temp, dir := SyncPlan(tc.asked, tc.full, tc.emptyOrdered, tc.newName); temp != tc.temp || dir != tc.dir {
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
		since   time.Duration
		state   WriterState
		ticks   uint64
		syscall WriterSyscall
	}
	ms := time.Millisecond
	busy, fuse, elsewhere := WriterBusy, WriterOnFUSE, WriterElsewhere
	running, inWrite, outside := SyscallRunning, SyscallInWrite, SyscallOutside
	for _, tc := range []struct {
		name    string
		samples []sample
		out     int // the first sample that says the writer is out
	}{
		{"asleep elsewhere, past the gap", []sample{{0, elsewhere, 5, 0}, {11 * ms, elsewhere, 5, 0}}, 1},
		{"within the gap only its user time counts", []sample{{1 * ms, elsewhere, 5, 0}, {5 * ms, elsewhere, 5, 0}, {10 * ms, elsewhere, 5, 0}}, 2},
		{"stopped outside any write(2): at once", []sample{{0, busy, 5, outside}}, 0},
		{"in its own code, preempted: at once", []sample{{0, busy, 5, running}, {1 * ms, busy, 5, outside}}, 1},
		{"runnable, not back in its code: waits past 100 ms",
			[]sample{{0, busy, 7, 0}, {50 * ms, busy, 7, 0}, {150 * ms, busy, 7, 0}, {900 * ms, busy, 7, 0}, {WriteGap + WriteStall, busy, 7, 0}}, 4},
		{"runnable, stopped inside its write(2): waits for the stall",
			[]sample{{0, busy, 7, inWrite}, {50 * ms, busy, 7, inWrite}, {900 * ms, busy, 7, running}, {WriteGap + WriteStall, busy, 7, inWrite}}, 3},
		{"runnable and back in its code", []sample{{0, busy, 7, 0}, {20 * ms, busy, 7, 0}, {30 * ms, busy, 9, 0}}, 2},
		{"one tick is no proof: it may be kernel time scaled", []sample{{0, busy, 7, running}, {20 * ms, busy, 8, running}, {30 * ms, busy, 9, running}}, 2},
		{"its user time grew within the gap", []sample{{0, busy, 7, 0}, {2 * ms, busy, 9, 0}}, 1},
		{"asleep on FUSE: one gap more", []sample{{0, busy, 3, 0}, {12 * ms, fuse, 3, 0}, {20 * ms, fuse, 3, 0}, {22 * ms, fuse, 3, 0}}, 3},
		{"asleep on FUSE outside a write(2): at once", []sample{{0, busy, 3, 0}, {12 * ms, fuse, 3, outside}}, 1},
		{"asleep on FUSE inside its write(2): the daemon may be slow to read the next WRITE",
			[]sample{{0, fuse, 3, inWrite}, {12 * ms, fuse, 3, inWrite}, {25 * ms, fuse, 3, inWrite}, {500 * ms, fuse, 3, inWrite}, {WriteGap + WriteStall, fuse, 3, inWrite}}, 4},
		{"asleep on FUSE, back in its code", []sample{{0, busy, 3, 0}, {12 * ms, fuse, 3, 0}, {13 * ms, fuse, 5, 0}}, 2},
		{"a page of its buffer read in (busy)", []sample{{0, busy, 1, 0}, {500 * ms, busy, 1, 0}, {WriteGap + WriteStall + ms, busy, 1, 0}}, 2},
		{"gone or unreadable", []sample{{0, busy, 1, 0}, {15 * ms, elsewhere, 0, 0}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ww WriteWatch
			for i, s := range tc.samples {
				out := ww.Out(s.since, WriterSample{State: s.state, UserTicks: s.ticks, Syscall: s.syscall})
				if out != (i == tc.out) {
					t.Fatalf("sample %d (%v, %v, %d ticks, syscall %v): out %v, want out first at sample %d", i, s.since, s.state, s.ticks, s.syscall, out, tc.out)
				}
				if out {
					return
				}
			}
			t.Fatal("never out")
		})
	}
}
