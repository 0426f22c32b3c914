// Package gcroom gives the daemon's garbage collector room: a heap goal of
// the live heap plus at least Room, where Go's default pacing (GOGC=100)
// sets it at twice the live heap, however small.
//
// The daemon's live heap is small (12 MiB over an rm -rf of 17,000 files:
// go-fuse's tree of nodes, the journal's tables) and every request
// allocates, so at Go's default the collector ran 25 times in two seconds
// of an rm -rf. At one P (package adaptprocs) each cycle's marking shares
// the P that serves the requests, and its write barriers slow them while
// it runs: with the journal, 7 % of rm -rf's time (docs/PERFORMANCE.md,
// "Room for the collector"). Room bounds what this costs in memory: a
// daemon whose live heap is past it is paced as Go paces it.
package gcroom

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Room is the least the heap may grow past the live heap before the
// collector runs (a daemon's RSS is at most about that much more than at
// Go's default pacing).
const Room = 64 << 20

// heapMinimum is Go's least heap goal at GOGC=100 (the runtime's
// defaultHeapMinimum). The runtime scales it with GOGC: the goal is never
// under heapMinimum × GOGC/100, whatever the live heap.
const heapMinimum = 4 << 20

// maxPercent bounds the GOGC Percent sets for a room of hundreds of
// heap minimums (a test's).
const maxPercent = 10000

// Percent is the GOGC that makes the heap goal about live + max(live,
// room): Go's 100 once the live heap is room or more, more below it. A
// live heap under Go's heap minimum (none yet, before the first cycle)
// is taken as the minimum: the GOGC that room/live would give there
// scales the minimum past live + room (GOGC=10000 made the first goal 400
// MiB: the daemon's heap grew by fresh pages, one fault each, to 250 MiB
// over 20,000 creates without a collection), where room/minimum makes it
// live + room.
func Percent(live, room uint64) int {
	if live >= room {
		return 100
	}
	live = max(live, heapMinimum)
	if room/live >= maxPercent/100 {
		return maxPercent
	}
	return max(100, int(room*100/live))
}

// changed reports whether the GOGC next differs enough from cur to set:
// by more than an eighth, so that a heap that breathes between cycles
// does not reset it at each.
func changed(cur, next int) bool {
	d := next - cur
	return d*8 > cur || -d*8 > cur
}

// liveMetric is the runtime's count of the heap the last cycle marked
// live (runtime/metrics).
const liveMetric = "/gc/heap/live:bytes"

// A pacer sets GOGC after each collection, from the live heap that
// collection found.
type pacer struct {
	room    uint64
	set     func(int) int // debug.SetGCPercent; a test's recorder
	mu      sync.Mutex    // stopped and cur, between a cycle's cleanup and stop
	stopped bool
	cur     int
	sample  [1]metrics.Sample
}

// sentinel is what a pacer lets the collector find dead, once a cycle:
// its cleanup runs after the cycle. A pointer keeps it off the tiny
// allocator, whose objects' cleanups may never run.
type sentinel struct {
	_ *int
	_ [2]uint64
}

// arm allocates the next sentinel and drops it.
func (p *pacer) arm() {
	runtime.AddCleanup(&sentinel{}, (*pacer).afterGC, p)
}

// afterGC sets GOGC from the live heap the cycle just ended found, and
// arms the next.
func (p *pacer) afterGC() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	metrics.Read(p.sample[:])
	if p.sample[0].Value.Kind() == metrics.KindUint64 {
		if next := Percent(p.sample[0].Value.Uint64(), p.room); changed(p.cur, next) {
			p.set(next)
			p.cur = next
		}
	}
	p.arm()
}

// stop leaves GOGC at Go's default and the sentinels unarmed.
func (p *pacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		p.set(100)
		p.cur = 100
	}
}

// start begins pacing with room, setting GOGC through set.
func start(room uint64, set func(int) int) *pacer {
	p := &pacer{room: room, set: set, cur: 100}
	p.sample[0].Name = liveMetric
	p.afterGC() // before the first cycle: the live heap is 0, the room all
	return p
}

// Start paces the collector with Room until stop is called. It changes
// nothing, and says so in the log, where GOGC is in the environment: the
// operator's pacing stands (GOGC=100 is Go's default).
func Start(logger *slog.Logger) (stop func()) {
	if v := os.Getenv("GOGC"); v != "" {
		logger.Info("gc: paced as GOGC asks", "GOGC", v)
		return func() {}
	}
	p := start(Room, debug.SetGCPercent)
	logger.Debug("gc: room for the collector", "room_bytes", Room)
	return p.stop
}
