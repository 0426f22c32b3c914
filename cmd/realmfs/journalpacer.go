package main

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The journal's pruner yields to the mount's requests. A prune at the
// bounds removes an older kept object for each one a removal or a save
// keeps: the kernel's work of a removal done a second time. Done while
// requests come, it shares their one P and the filesystem's locks (an rm
// -rf at the bound 1.2-1.7 times as long as with journal=off, measured:
// docs/PERFORMANCE.md), so it waits for the mount to be idle, unless the
// journal holds more than its bounds and their slack (journal.Slack).

// idleFor is how long a mount must see no request for the pruner to go
// on: far longer than the gap between two requests of a program at work
// (tens of microseconds), far shorter than a person's or an agent's pause.
const idleFor = 5 * time.Millisecond

// A pacer holds a prune's removals while requests come (journal.Bounds.Pace).
type pacer struct {
	requests atomic.Pointer[func() uint64] // the mount's count of requests; nil: not mounted yet, no wait
	done     <-chan struct{}               // closed: no more waiting
	seen     uint64                        // the count at the last look; the pruner's alone
}

// paceBy makes p wait on the mount whose count of requests is requests.
func (p *pacer) paceBy(requests func() uint64) { p.requests.Store(&requests) }

// pace returns once the mount has been idle for idleFor since the last
// look, at once where no request came since, and whenever urgent says so
// or the pruner stops.
func (p *pacer) pace(urgent func() bool) {
	rf := p.requests.Load()
	if rf == nil {
		return
	}
	// A request that waits for the pruner's P runs first, and is counted.
	runtime.Gosched()
	n := (*rf)()
	for n != p.seen && !urgent() {
		p.seen = n
		t := time.NewTimer(idleFor)
		select {
		case <-p.done:
			t.Stop()
			return
		case <-t.C:
		}
		n = (*rf)()
	}
	p.seen = n
}
