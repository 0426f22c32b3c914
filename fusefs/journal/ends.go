package journal

import (
	"fmt"
	"time"
)

// Ends done are held, not written one by one: such an end is written with
// the next intent (one pwrite for both), or, when none comes, by a timer
// endsDelay later, at Close, and before Records reads the segments. It
// needs no write of its own: a kill -9 of the daemon loses the held ends,
// and recovery resolves each intent with no end by what its names lead to
// (docs/JOURNAL.md, "Order per change"), as it does an end torn by a
// crash, finding the change made. An aborted end is written at once: a
// change not made, whose name another has taken since (a create's
// EEXIST), would read as a change from outside. An untar makes five changes a file, so this halves its pwrites to
// the journal. A reader beside the daemon (realmfs journal list) sees a
// change in flight for at most endsDelay after it ended.

// endsDelay is how long an end is held when no intent comes to carry it.
const endsDelay = 2 * time.Millisecond

// endsHeldMax is how many bytes of ends are held at most: past it they are
// written at once.
const endsHeldMax = 4 << 10

// heldEnds are the ends encoded and not yet written, under Journal.mu.
type heldEnds struct {
	ends      []byte
	endsMax   uint64      // the highest seq among them
	endsTimer *time.Timer // armed while ends are held
}

// holdEnd holds the encoded end b of change seq. Under mu.
func (j *Journal) holdEnd(b []byte, seq uint64) error {
	j.ends = append(j.ends, b...)
	j.endsMax = max(j.endsMax, seq)
	if len(j.ends) >= endsHeldMax {
		return j.writeEndsLocked()
	}
	if j.endsTimer == nil {
		j.endsTimer = time.AfterFunc(endsDelay, j.flushEnds)
	}
	return nil
}

// writeLocked writes b, which begins with the held ends, at the end of the
// segment appended to (b fits in it), and lets go of the ends. Under mu.
func (j *Journal) writeLocked(b []byte) error {
	cur := j.cur
	if _, err := cur.f.WriteAt(b, cur.off); err != nil {
		return fmt.Errorf("journal: appending to log/%s: %w", segmentName(cur.num), err)
	}
	cur.off += int64(len(b))
	j.written += uint64(len(b))
	if j.endsMax != 0 {
		cur.note(&line{Seq: j.endsMax})
	}
	j.ends, j.endsMax = j.ends[:0], 0
	return nil
}

// writeEndsLocked writes the held ends, into the next segment where they
// do not fit in this one (left held while a group commit syncs it: the
// next write or the timer carries them). Under mu.
func (j *Journal) writeEndsLocked() error {
	if len(j.ends) == 0 || j.cur == nil {
		return nil
	}
	if j.cur.off+int64(len(j.ends)) > j.cur.cap {
		if j.syncing {
			return nil
		}
		if err := j.rotateLocked(); err != nil {
			return err
		}
	}
	return j.writeLocked(j.ends)
}

// flushEnds is the timer's: it writes the ends held, and holds the timer
// armed while some are left.
func (j *Journal) flushEnds() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.endsTimer = nil
	if j.closed {
		return
	}
	if err := j.writeEndsLocked(); err != nil || len(j.ends) > 0 {
		// Tried again later, or with the next intent, which reports it.
		j.endsTimer = time.AfterFunc(endsDelay, j.flushEnds)
	}
}
