package journal

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// NoKeep, as Begin's keep: the change keeps no version.
const NoKeep = -1

// Change is a change whose intent is appended: Done or Abort appends its
// end, once.
type Change struct {
	j     *Journal
	seq   uint64
	kept  bool // kept/<seq> is a link Begin made
	ended atomic.Bool
	// What the fresh objects need (fresh.go): the record's owner and op,
	// its objects' identities, and whether its intent went unsynced.
	owner         string
	op            Op
	before, after *ID
	lazy          bool
}

// Seq is the change's seq.
func (c *Change) Seq() uint64 { return c.seq }

// Begin appends rec's intent (Seq and Time set here, Kept set to keep !=
// NoKeep), before the change it describes is made. keep, where the change
// replaces an object (a rewrite's old file, the file a rename replaces),
// is an O_PATH fd of that object, verified by the caller: it is linked as
// kept/<seq>. With Options.Durable the intent and that link are durable
// before Begin returns (one fdatasync and one fsync of kept/, shared by
// the Begins waiting together), but for a change of an object its owner
// made (fresh.go), which the next sync makes durable, and for the making
// of an empty object on ext4, written through to the device for the next
// flush to carry (flush.go).
//
// The caller then makes the change and ends it: Done once made, Abort if
// not. An error means no change may be made: the intent is ended aborted.
func (j *Journal) Begin(rec Record, keep int) (*Change, error) {
	if !ops[rec.Op] || rec.Op == OpUnlink || rec.Op == OpRmdir {
		return nil, fmt.Errorf("journal: Begin of op %q (unlink and rmdir are Remove's)", rec.Op)
	}
	rec.Kept = keep != NoKeep
	pos, lazy, err := j.appendIntentLazy(&rec)
	if err != nil {
		return nil, err
	}
	c := &Change{j: j, seq: rec.Seq, owner: rec.Owner, op: rec.Op, after: rec.After, lazy: lazy}
	if rec.Before != nil {
		id := rec.Before.ID()
		c.before = &id
	}
	var gen uint64
	if rec.Kept {
		if err := dirfd.Link(keep, j.kept, keptEntry(c.seq)); err != nil {
			err = fmt.Errorf("journal: keeping what change %d replaces: %w", c.seq, err)
			return nil, errors.Join(err, c.end(Aborted, nil))
		}
		c.kept = true
		gen = j.linked()
		if id, ok := fdID(keep); ok {
			j.noteKept(id, c.seq)
		}
	}
	if j.opts.Durable && !lazy {
		if err := j.settle(rec.Op, pos, gen); err != nil {
			return nil, errors.Join(err, c.Abort())
		}
	}
	return c, nil
}

// Done appends the change's end, done. after is the identity the change
// left at its name where the intent could not say it (a directory, a
// symlink or a node made): nil otherwise.
func (c *Change) Done(after *ID) error { return c.end(Done, after) }

// Abort appends the change's end, aborted, and removes the link Begin
// kept: the change was not made.
func (c *Change) Abort() error {
	var err error
	if c.kept && !c.ended.Load() {
		if err = dirfd.Unlink(c.j.kept, keptEntry(c.seq), 0); errors.Is(err, unix.ENOENT) {
			err = nil
		}
		if err == nil {
			c.j.forgetKept(c.seq)
		}
	}
	return errors.Join(err, c.end(Aborted, nil))
}

// end appends the change's end, once.
func (c *Change) end(e End, after *ID) error {
	if !c.ended.CompareAndSwap(false, true) {
		return fmt.Errorf("journal: change %d ended twice", c.seq)
	}
	_, err := c.j.appendLine(func() line {
		if e == Done {
			c.j.freshDone(c, after)
		}
		return line{Seq: c.seq, End: e, After: after}
	})
	return err
}

// keptEntry is the name of change seq's kept version in kept/.
func keptEntry(seq uint64) string { return strconv.FormatUint(seq, 10) }

// appendIntent appends rec's intent, its Seq and Time set, and returns
// the position it ends at.
func (j *Journal) appendIntent(rec *Record) (uint64, error) {
	pos, _, err := j.appendIntentLazy(rec)
	return pos, err
}

// appendIntentLazy is appendIntent that also says whether the intent
// needs no sync of its own: a change of a fresh object by its maker
// (fresh.go).
func (j *Journal) appendIntentLazy(rec *Record) (pos uint64, lazy bool, err error) {
	stamped := false
	pos, err = j.appendLine(func() line {
		rec.Seq = j.next
		if !stamped { // once: appendLine may ask again after a rotation
			rec.Time, stamped = j.opts.Now().UTC(), true
		}
		lazy = j.freshFor(rec)
		return intentLine(rec)
	})
	return pos, lazy, err
}

// appendEnd appends change seq's end.
func (j *Journal) appendEnd(seq uint64, e End, after *ID) error {
	_, err := j.appendLine(func() line { return line{Seq: seq, End: e, After: after} })
	return err
}

// appendLine appends the line mk makes (under mu, so that an intent's seq
// is the next: the segments hold intents in ascending seq) to the segment
// appended to, rotated first where the line does not fit. It returns the
// position the line ends at, for syncTo.
func (j *Journal) appendLine(mk func() line) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		if j.closed {
			return 0, ErrClosed
		}
		l := mk()
		if l.Op != "" && j.failed != nil {
			return 0, j.failed // nothing is durable since: no new change
		}
		b, err := l.encode()
		if err != nil {
			return 0, err
		}
		if int64(len(b)) > j.opts.SegmentSize/2 {
			return 0, fmt.Errorf("journal: record %d is %d bytes, more than half a segment", l.Seq, len(b))
		}
		if l.Op == "" && l.End == Done && j.cur != nil {
			return j.written, j.holdEnd(b, l.Seq)
		}
		out := b
		if len(j.ends) > 0 {
			out = append(j.ends, b...)
		}
		if cur := j.cur; cur != nil && cur.off+int64(len(out)) <= cur.cap {
			if err := j.writeLocked(out); err != nil {
				return 0, err
			}
			cur.note(&l)
			if l.Op != "" {
				j.next++
				if j.sinceGrown++; j.sinceGrown >= growEvery {
					j.sinceGrown = 0
					j.signalGrown()
				}
			}
			return j.written, nil
		}
		if j.syncing { // the group commit syncs cur: rotate after it
			j.synced.Wait()
			continue
		}
		full := j.cur != nil
		if err := j.rotateLocked(); err != nil {
			return 0, err
		}
		if full {
			j.sinceGrown = 0
			j.signalGrown()
		}
	}
}

// rotateLocked makes the next segment the one appended to, the current
// one made durable first (with Options.Durable) and closed. Under mu, no
// group commit under way.
func (j *Journal) rotateLocked() error {
	if cur := j.cur; cur != nil {
		if j.opts.Durable && j.failed == nil && j.durable < j.written {
			if err := dirfd.Fdatasync(int(cur.f.Fd())); err != nil {
				j.failed = fmt.Errorf("journal: syncing log/%s: %w", segmentName(cur.num), err)
				return j.failed
			}
			j.durable = j.written
		}
		cur.f.Close()
		cur.f, j.cur = nil, nil
	}
	seg, err := makeSegment(j.log, j.lastNum+1, j.opts.SegmentSize, j.opts.Durable)
	if err != nil {
		return err
	}
	j.lastNum = seg.num
	j.segs = append(j.segs, seg)
	j.cur = seg
	return nil
}

// linked counts a link made into kept/ and returns its number, for
// syncTo.
func (j *Journal) linked() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keptGen++
	return j.keptGen
}
