// Package ratelog bounds a log's lines of each kind: a daemon's reports of
// what no caller can be told (a commit that failed, a writer killed) are
// made by the callers' actions, so an agent that repeats one failing
// action thousands of times a second would otherwise write that many lines
// into the host's log, as root and past every bound of the mount. Each
// kind (the line's format) gets Burst lines a Window; the next line of it
// to be written says how many were left out since.
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
	window int64 // nanoseconds
	kinds  sync.Map
}

// kind is one kind's count in its current window.
type kind struct {
	window     atomic.Int64 // the window's number (time / window)
	lines      atomic.Int64 // lines asked for in it
	suppressed atomic.Int64 // lines left out, not yet said
}

// New is a Limiter of burst lines of each kind per window.
func New(burst int, window time.Duration) *Limiter {
	return &Limiter{burst: int64(burst), window: int64(window)}
}

// Allow reports whether a line of kind k may be written at now, and how
// many lines of k were left out since the last one written (to be said in
// it).
func (l *Limiter) Allow(k string, now time.Time) (ok bool, leftOut int64) {
	v, found := l.kinds.Load(k)
	if !found {
		v, _ = l.kinds.LoadOrStore(k, new(kind))
	}
	c := v.(*kind)
	w := now.UnixNano() / l.window
	if old := c.window.Load(); old != w && c.window.CompareAndSwap(old, w) {
		c.lines.Store(0)
	}
	if c.lines.Add(1) > l.burst {
		c.suppressed.Add(1)
		return false, 0
	}
	return true, c.suppressed.Swap(0)
}
