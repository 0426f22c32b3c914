package journal

import "time"

// Ends done are held, not written one by one: such an end is written with
// the next intent (one pwrite for both), or, when none comes, by a timer
// endsDelay later, at Close, and before Records reads the segments. It
// needs no write of its own: a kill -9 of the daemon loses the held ends,
// and recovery resolves each intent with no end by what its names lead to
// (docs/JOURNAL.md, "Order per change"), as it does an end torn by a
// crash, finding the change made. An aborted end is written at once: a
// change not made, whose name another has taken since (a create's
// EEXIST), would read as a change from outside. An untar makes five
// changes a file, so this halves its pwrites to the journal. realmfs
// journal list and diff of a mountpoint ask the daemon to write the ends
// it holds first (WriteHeld); another reader beside the daemon sees a
// change in flight for at most endsDelay after it ended.

// endsDelay is how long an end is held when no intent comes to carry it.
// Each firing of the timer wakes the daemon: at 2 ms (until 2026-12-04) a
// busy daemon's timer fired every millisecond or two, 5 epoll_pwait and
// 0.9 netpoll-break writes per created file (docs/PERFORMANCE.md, the
// journal's counts); at 100 ms, 0.5 and 0.05, and 0.9 fewer pwrites.
const endsDelay = 100 * time.Millisecond

// endsHeldMax is how many bytes of ends are held at most: past it they are
// written at once.
const endsHeldMax = 4 << 10

// heldEnds are the ends encoded and not yet written, under Journal.mu.
type heldEnds struct {
	ends      []byte
	endsMax   uint64      // the highest seq among them
	endsTimer *time.Timer // armed while ends are held
}

// hold adds b, change seq's end encoded, and reports whether the ends
// held are past endsHeldMax, to be written at once.
func (h *heldEnds) hold(b []byte, seq uint64) (full bool) {
	h.ends = append(h.ends, b...)
	h.endsMax = max(h.endsMax, seq)
	return len(h.ends) >= endsHeldMax
}

// drop lets go of the ends held, once written.
func (h *heldEnds) drop() { h.ends, h.endsMax = h.ends[:0], 0 }

// arm arms the timer that writes the ends (fn) unless it is armed.
func (h *heldEnds) arm(fn func()) {
	if h.endsTimer == nil {
		h.endsTimer = time.AfterFunc(endsDelay, fn)
	}
}

// stop stops the timer.
func (h *heldEnds) stop() {
	if h.endsTimer != nil {
		h.endsTimer.Stop()
		h.endsTimer = nil
	}
}
