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
// change in flight for at most endsDelay after it ended. A removal's
// intent is held the same way, its kept/ entry saying it meanwhile
// (described.go): recovery rebuilds one a kill -9 lost from that entry.

// endsDelay is how long an end is held when no intent comes to carry it.
// Each firing of the timer wakes the daemon: at 2 ms (until 2026-12-04) a
// busy daemon's timer fired every millisecond or two, 5 epoll_pwait and
// 0.9 netpoll-break writes per created file (docs/PERFORMANCE.md, the
// journal's counts); at 100 ms, 0.5 and 0.05, and 0.9 fewer pwrites.
const endsDelay = 100 * time.Millisecond

// endsHeldMax is how many bytes of lines are held at most (less in a
// small segment: Journal.holdMax): past it they are written with the next
// line. An rm -rf holds all its lines (a removal's intent and its end,
// about 350 bytes), so this is its pwrite to the journal: at 4 KiB, one
// in 11 removals wrote and converted a preallocated extent of the
// segment, 3.5 µs a removal (docs/PERFORMANCE.md); at 16 KiB, one in
// 45. What a kill -9 loses of them recovery finds again from kept/'s
// described entries and the names' state.
const endsHeldMax = 16 << 10

// heldEnds are the ends encoded and not yet written, under Journal.mu,
// and the intents held with them (described.go).
type heldEnds struct {
	ends      []byte
	endsMax   uint64      // the highest seq among them
	endsTimer *time.Timer // made at the first hold, kept
	armed     bool        // endsTimer is set to fire: lines are held
	// intents: the intents among them, as the segment written to notes
	// them (their Before and paths left out).
	intents []line
}

// hold adds b, l encoded.
func (h *heldEnds) hold(b []byte, l *line) {
	h.ends = append(h.ends, b...)
	h.endsMax = max(h.endsMax, l.Seq)
	if l.Op != "" {
		h.intents = append(h.intents, line{Seq: l.Seq, Time: l.Time, Op: l.Op, Kept: l.Kept})
	}
}

// drop lets go of the lines held, once written, and stops the timer, so
// that it never fires while lines go with later ones: at one P a firing
// takes the P from the reader in read(2) (internal/adaptprocs).
func (h *heldEnds) drop() {
	h.ends, h.endsMax, h.intents = h.ends[:0], 0, h.intents[:0]
	h.stop()
}

// arm sets the timer that writes the ends (fn) unless it is set.
func (h *heldEnds) arm(fn func()) {
	switch {
	case h.armed:
	case h.endsTimer == nil:
		h.endsTimer = time.AfterFunc(endsDelay, fn)
	default:
		h.endsTimer.Reset(endsDelay)
	}
	h.armed = true
}

// stop stops the timer.
func (h *heldEnds) stop() {
	if h.armed {
		h.endsTimer.Stop()
		h.armed = false
	}
}
