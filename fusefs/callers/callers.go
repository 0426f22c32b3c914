// Package callers counts the processes that make requests of the mount,
// so that the daemon's Ps (internal/adaptprocs) rise for callers that run
// in parallel and not for one caller beside the requests the kernel sends
// on its own. The kernel's count of requests not yet answered (fusectl's
// waiting) counts both: the RELEASE or RELEASEDIR a close sends is
// answered after the caller's next request has come (a tar x's next
// CREATE, an rm -rf's next UNLINK), so that the count says two for a
// fifth of the time, and for a quarter of a second at a stretch in a
// tree of small directories (docs/PERFORMANCE.md, "One caller is not
// two").
//
// A raw filesystem layer (FS) notes each request's thread (the pid of its
// header: a thread id) in a Set, which the daemon empties at each sample,
// counting the threads' processes.
package callers

import (
	"slices"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// slots is the size of a Set's table: far more than the callers one
// sample sees, so that two of them rarely share a slot.
const slots = 64

// A Set is the threads seen since it was last taken, in a table of slots
// by thread id: two threads whose ids share a slot count once, which can
// only delay a rise. Note is safe to call concurrently with itself and
// with Take; Take is one caller's (the sampler of the daemon's Ps).
type Set struct {
	s [slots]atomic.Uint32
	n atomic.Uint64 // the requests noted, ever
	// each: called at each request noted (OnRequest); nil: none.
	each atomic.Pointer[func()]

	groups map[uint32]uint32 // thread → its process, as Take's tgid said: Take's alone
}

// maxGroups bounds the threads whose process a Set remembers; past it
// it forgets them all (a thread id the kernel gave to another process
// since is then read anew).
const maxGroups = 1024

// Note adds thread tid (0, the kernel's own requests: none).
func (c *Set) Note(tid uint32) {
	c.n.Add(1)
	if f := c.each.Load(); f != nil {
		(*f)()
	}
	if tid == 0 {
		return
	}
	sl := &c.s[tid%slots]
	if sl.Load() != tid { // a thread's requests after its first write nothing
		sl.Store(tid)
	}
}

// OnRequest has f called at each request noted from now on, on the
// request's goroutine, before it is served: the daemon's Ps are sampled
// so (internal/adaptprocs), not by a timer.
func (c *Set) OnRequest(f func()) { c.each.Store(&f) }

// Requests is how many requests Note has noted: one that changed since
// a look is a mount not idle meanwhile.
func (c *Set) Requests() uint64 { return c.n.Load() }

// Take returns how many processes the threads noted since the last Take
// belong to, by tgid (a thread's process, read once a thread; nil counts
// threads), and forgets the threads. A process counts once however many
// of its threads made requests: a Go program's goroutines move between
// threads, and its requests, one after another, come from several.
func (c *Set) Take(tgid func(tid uint32) uint32) int {
	var seen [slots]uint32
	n := 0
	for i := range c.s {
		if c.s[i].Load() == 0 {
			continue
		}
		tid := c.s[i].Swap(0)
		if tid == 0 {
			continue
		}
		p := tid
		if tgid != nil {
			p = c.group(tid, tgid)
		}
		if !slices.Contains(seen[:n], p) {
			seen[n] = p
			n++
		}
	}
	return n
}

// group is thread tid's process, remembered.
func (c *Set) group(tid uint32, tgid func(uint32) uint32) uint32 {
	if p, ok := c.groups[tid]; ok {
		return p
	}
	if c.groups == nil || len(c.groups) >= maxGroups {
		c.groups = make(map[uint32]uint32)
	}
	p := tgid(tid)
	c.groups[tid] = p
	return p
}

// FS is a raw filesystem that notes in Seen the thread of each request a
// caller waits for, and serves it by the RawFileSystem it wraps.
type FS struct {
	fuse.RawFileSystem
	Seen *Set
}
