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
// -rf at the bound 1.27-1.44 times as long as with journal=off, 1.07-1.26
// paced: docs/PERFORMANCE.md), so it waits for the mount to be idle,
// unless the journal holds more than its bounds and their slack
// (bounds.Slack), or the mount has been busy for maxWait.

// idleFor is how long a mount must see no request for the pruner to go
// on: far longer than the gap between two requests of a program at work
// (tens of microseconds), far shorter than a person's or an agent's pause.
const idleFor = 5 * time.Millisecond

// maxLook bounds the wait between two looks at a busy mount, which
// doubles from idleFor after each look that found requests: a long busy
// spell is looked at a few times a second, not every idleFor. Each look
// is a timer the one P's blocked reader must be taken from (Go's sysmon
// does it), which kept the runtime handing the P between threads for the
// rest of an rm -rf (docs/PERFORMANCE.md); the prune then begins at most
// maxLook after the spell ends.
const maxLook = 100 * time.Millisecond

// maxWait bounds how long the pacer waits through one busy spell: a mount
// with no pause of idleFor in a minute (a build, a test suite) gets its
// prune all the same, so that the age bound (journal_keep), which has no
// slack, is late by a minute at most.
const maxWait = time.Minute

// A pacer holds a prune's removals while requests come (journal.Bounds.Pace).
type pacer struct {
	requests atomic.Pointer[func() uint64] // the mount's count of requests; nil: not mounted yet, no wait
	done     <-chan struct{}               // closed: no more waiting
	seen     uint64                        // the count at the last look; the pruner's alone
	busy     time.Time                     // when the busy spell waited through began; zero: none
	now      func() time.Time              // nil: time.Now
}

// paceBy makes p wait on the mount whose count of requests is requests.
func (p *pacer) paceBy(requests func() uint64) { p.requests.Store(&requests) }

// pace returns once the mount has seen no request for at least idleFor
// since the last look, at once where no request came since, and whenever
// urgent says so, the pruner stops, or the busy spell has been waited
// through for maxWait.
func (p *pacer) pace(urgent func() bool) {
	rf := p.requests.Load()
	if rf == nil {
		return
	}
	// A request that waits for the pruner's P runs first, and is counted.
	runtime.Gosched()
	n := (*rf)()
	for wait := idleFor; n != p.seen && !urgent(); wait = min(2*wait, maxLook) {
		p.seen = n
		if p.busy.IsZero() {
			p.busy = p.clock()
		} else if p.clock().Sub(p.busy) >= maxWait {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-p.done:
			t.Stop()
			return
		case <-t.C:
		}
		n = (*rf)()
	}
	p.seen, p.busy = n, time.Time{}
}

// clock is p's now.
func (p *pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}
