// Package callers counts the threads that make requests of the mount, so
// that the daemon's Ps (internal/adaptprocs) rise for callers that run in
// parallel and not for one caller beside the requests the kernel sends on
// its own. The kernel's count of requests not yet answered (fusectl's
// waiting) counts both: the RELEASE or RELEASEDIR a close sends is
// answered after the caller's next request has come (a tar x's next
// CREATE, an rm -rf's next UNLINK), so that the count says two for a
// fifth of the time, and for a quarter of a second at a stretch in a
// tree of small directories (docs/PERFORMANCE.md, "One caller is not
// two").
//
// A raw filesystem layer (FS) notes each request's thread (the pid of its
// header: a thread id) in a Set, which the daemon empties at each sample.
package callers

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// slots is the size of a Set's table: far more than the callers one
// sample sees, so that two of them rarely share a slot.
const slots = 64

// A Set is the threads seen since it was last taken, in a table of slots
// by thread id: two threads whose ids share a slot count once, which can
// only delay a rise. Note and Take are safe to call concurrently.
type Set struct {
	s [slots]atomic.Uint32
}

// Note adds thread tid (0, the kernel's own requests: none).
func (c *Set) Note(tid uint32) {
	if tid == 0 {
		return
	}
	sl := &c.s[tid%slots]
	if sl.Load() != tid { // a thread's requests after its first write nothing
		sl.Store(tid)
	}
}

// Take returns how many threads were noted since the last Take, and
// forgets them.
func (c *Set) Take() int {
	n := 0
	for i := range c.s {
		if c.s[i].Load() != 0 && c.s[i].Swap(0) != 0 {
			n++
		}
	}
	return n
}

// FS is a raw filesystem that notes in Seen the thread of each request a
// caller waits for, and serves it by the RawFileSystem it wraps.
type FS struct {
	fuse.RawFileSystem
	Seen *Set
}
