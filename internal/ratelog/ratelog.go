// Package ratelog bounds a log's lines of each kind: a daemon's reports of
// what no caller can be told (a commit that failed, a writer killed) are
// made by the callers' actions, so an agent that repeats one failing
// action thousands of times a second would otherwise write that many lines
// into the host's log, as root and past every bound of the mount. Each
// kind (the line's format) gets Burst lines in any span of one Window, not
// only in windows of the clock: a burst that straddles a minute's turn
// still writes Burst lines, not twice that. The next line of a kind to be
// written says how many were left out since.
//
// Lock-free (atomics and a sync.Map), so that it may be called under any
// lock of the caller's.
package ratelog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Limiter counts lines by kind. The zero value is not usable: New.
type Limiter struct {
	burst  int64
	window int64     // milliseconds
	epoch  time.Time // New's time: lines are timed from it, by the monotonic clock
	kinds  sync.Map
}

// kind is one kind's sliding log: the times of its last burst lines
// written, line n's in ring[n % burst].
type kind struct {
	next       atomic.Int64    // the number of lines written
	ring       []atomic.Uint64 // pack(generation, time) of the lines written
	suppressed atomic.Int64    // lines left out, not yet said
}

// A ring slot packs the line's generation (its number / burst, plus one,
// so that an empty slot is generation 0) above its time in milliseconds
// since the Limiter's epoch (42 bits: 139 years). The generation tells a reader whether
// the slot already holds the line it must wait out or still an older one,
// whose writer has claimed its number but not yet stored its time.
const (
	timeBits = 42
	timeMask = 1<<timeBits - 1
	genMask  = 1<<(64-timeBits) - 1
)

func pack(gen, ms int64) uint64 {
	return uint64(gen)&genMask<<timeBits | uint64(ms)&timeMask
}

// New is a Limiter of burst lines of each kind in any window's span
// (rounded up to a millisecond).
func New(burst int, window time.Duration) *Limiter {
	ms := (window + time.Millisecond - 1) / time.Millisecond
	return &Limiter{burst: int64(max(burst, 1)), window: int64(ms), epoch: time.Now()}
}

// Allow reports whether a line of kind k may be written at now (a reading
// of time.Now, whose monotonic clock a change of the wall clock does not
// move), and how many lines of k were left out since the last one written
// (to be said in it). A line is written when the burst-th line before it
// was written at least a window ago.
func (l *Limiter) Allow(k string, now time.Time) (ok bool, leftOut int64) {
	v, found := l.kinds.Load(k)
	if !found {
		v, _ = l.kinds.LoadOrStore(k, &kind{ring: make([]atomic.Uint64, l.burst)})
	}
	c := v.(*kind)
	ms := max(now.Sub(l.epoch).Milliseconds(), 0)
	for {
		n := c.next.Load()
		slot := &c.ring[n%l.burst]
		if n >= l.burst {
			held := slot.Load()
			// The line this one waits out is n-burst, of generation n/burst.
			// Another generation: its writer has not stored its time yet, so
			// it was written just now.
			if held != pack(n/l.burst, int64(held&timeMask)) || ms-int64(held&timeMask) < l.window {
				c.suppressed.Add(1)
				return false, 0
			}
		}
		if c.next.CompareAndSwap(n, n+1) {
			slot.Store(pack(n/l.burst+1, ms))
			return true, c.suppressed.Swap(0)
		}
	}
}
