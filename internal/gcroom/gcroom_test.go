package gcroom

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const room = 64 << 20
	for _, tc := range []struct {
		name string
		live uint64
		want int
	}{
		{"no live heap yet: the goal is the heap minimum scaled to the room", 0, 1600},
		{"a hundredth of the room, under the heap minimum", room / 100, 1600},
		{"the heap minimum", heapMinimum, 1600},
		{"a daemon's 12 MiB", 12 << 20, 533},
		{"half the room", room / 2, 200},
		{"just under the room", room - 1, 100},
		{"the room", room, 100},
		{"past the room: Go's pacing", 4 * room, 100},
	} {
		t.Run(tc.name+": the goal", func(t *testing.T) {
			// The runtime's goal: the live heap grown by GOGC percent,
			// and never under the heap minimum scaled by it; within a
			// heap minimum of live + max(live, room).
			p := uint64(Percent(tc.live, room))
			goal := max(tc.live+tc.live*p/100, heapMinimum*p/100)
			if want := tc.live + max(tc.live, room); goal+heapMinimum < want || goal > want+heapMinimum {
				t.Errorf("live %d: GOGC %d makes a goal of %d, want %d within %d", tc.live, p, goal, want, heapMinimum)
			}
		})
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, room); got != tc.want {
				t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, room, got, tc.want)
			}
		})
	}
}

func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		cur, next int
		want      bool
	}{
		{100, 100, false},
		{800, 880, false},  // a tenth: the heap breathing
		{800, 900, false},  // an eighth exactly
		{800, 901, true},   // past it
		{800, 699, true},   // past it, down
		{533, 100, true},   // the heap grew past the room
		{100, 10000, true}, // the first cycle
	} {
		if got := changed(tc.cur, tc.next); got != tc.want {
			t.Errorf("changed(%d, %d) = %v, want %v", tc.cur, tc.next, got, tc.want)
		}
	}
}

// TestPacerSetsAfterEachCycle: the pacer sets GOGC at its start and,
// after a collection, from the live heap it found; stopped, it leaves
// Go's 100 and sets nothing more. A room far past the test's live heap
// makes the first set the most; a room of one byte, which any live heap
// is past, makes the set after the next cycle Go's 100.
func TestPacerSetsAfterEachCycle(t *testing.T) {
	sets := make(chan int, 16)
	p := start(1<<62, func(v int) int { sets <- v; return 0 })
	if got := <-sets; got != maxPercent {
		t.Fatalf("first set %d, want %d", got, maxPercent)
	}
	p.mu.Lock()
	p.room = 1
	p.mu.Unlock()
	runtime.GC() // the sentinel dies; its cleanup runs after the cycle
	if got := <-sets; got != 100 {
		t.Fatalf("set after a cycle %d, want 100 (a live heap past a room of 1 byte)", got)
	}
	p.stop()
	p.stop()
	runtime.GC()
	runtime.GC()
	close(sets)
	for v := range sets {
		if v != 100 {
			t.Errorf("set %d after stop, want only Go's 100", v)
		}
	}
}

// gcPercent reads the runtime's GOGC (setting it back).
func gcPercent() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}

// TestStart: Start sets the runtime's GOGC from the live heap (this test's
// is far under Room: more than Go's 100) and stop leaves Go's 100; where
// GOGC is in the environment it changes nothing.
func TestStart(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	debug.SetGCPercent(137)
	stop := Start(slog.New(slog.DiscardHandler))
	if got := gcPercent(); got <= 100 {
		t.Errorf("GOGC %d after Start with a small live heap, want more than 100", got)
	}
	stop()
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC %d after stop, want 100", got)
	}

	debug.SetGCPercent(137)
	t.Setenv("GOGC", "137")
	stop = Start(slog.New(slog.DiscardHandler))
	runtime.GC()
	if got := gcPercent(); got != 137 {
		t.Errorf("GOGC %d with GOGC=137 in the environment, want it left at 137", got)
	}
	stop()
	if got := gcPercent(); got != 137 {
		t.Errorf("GOGC %d after a stop that started nothing, want 137", got)
	}
}
