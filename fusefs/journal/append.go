package journal

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
	"github.com/realm-dev/realm/fusefs/journal/makers"
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
	owner         makers.Owner
	op            Op
	before, after *ID
	lazy          bool
	keptBytes     int64 // what the kept link added to Held's bytes
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
// made (fresh.go), which the next sync makes durable, for the making of
// an empty object on ext4, written through to the device for the next
// flush to carry, and on ext4 with a jbd2 journal, where it is carried
// (package logsync).
//
// The caller then makes the change and ends it: Done once made, Abort if
// not. An error means no change may be made: the intent is ended aborted.
func (j *Journal) Begin(rec Record, keep int) (*Change, error) {
	if !ops[rec.Op] || rec.Op == OpUnlink || rec.Op == OpRmdir {
		return nil, fmt.Errorf("journal: Begin of op %q (unlink and rmdir are Remove's)", rec.Op)
	}
	rec.Kept = keep != NoKeep
	pos, lazy, err := j.appendIntent(&rec, false)
	if err != nil {
		return nil, err
	}
	c := &Change{j: j, seq: rec.Seq, owner: makers.Owner{Name: rec.Owner, Start: rec.OwnerStart}, op: rec.Op, after: rec.After, lazy: lazy}
	if rec.Before != nil {
		id := rec.Before.ID()
		c.before = &id
	}
	var gen uint64
	if rec.Kept {
		if err := dirfd.Link(keep, j.kept, keptEntry(c.seq)); err != nil {
			err = fmt.Errorf("journal: keeping what change %d replaces: %w", c.seq, err)
			return nil, errors.Join(err, c.end(Aborted, nil, time.Time{}))
		}
		c.kept = true
		gen = j.linked()
		var st unix.Stat_t
		var link *ID
		if dirfd.Fstat(keep, &st) == nil {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				link = &ID{st.Dev, st.Ino}
			}
			c.keptBytes = keptWeight(&st)
		}
		j.countKept(c.seq, c.keptBytes, 1, link)
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
func (c *Change) Done(after *ID) error { return c.end(Done, after, time.Time{}) }

// DoneCtime is Done of a change of an object's metadata, with the object's
// ctime right after it (Record.AfterCtime).
func (c *Change) DoneCtime(ctime time.Time) error { return c.end(Done, nil, ctime) }

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
			c.j.countKept(c.seq, -c.keptBytes, -1, nil)
		}
	}
	return errors.Join(err, c.end(Aborted, nil, time.Time{}))
}

// end appends the change's end, once.
func (c *Change) end(e End, after *ID, ctime time.Time) error {
	if !c.ended.CompareAndSwap(false, true) {
		return fmt.Errorf("journal: change %d ended twice", c.seq)
	}
	_, err := c.j.appendLine(func() line {
		if e == Done {
			c.j.freshDone(c, after)
		}
		return line{Seq: c.seq, End: e, After: after, Ctime: ctime}
	})
	return err
}

// keptEntry is the name of change seq's kept version in kept/, where
// no described one was noted (keptName).
func keptEntry(seq uint64) string { return keptname.Plain(seq) }

// appendIntent appends rec's intent, its Seq and Time set, and returns
// the position it ends at (0: nothing to sync, package carry) and whether
// it needs no sync of its own: a change of a fresh object by its maker
// (fresh.go). With hold it is held with the ends (appendLineHeld).
func (j *Journal) appendIntent(rec *Record, hold bool) (pos uint64, lazy bool, err error) {
	stamped := false
	pos, err = j.appendLineHeld(func() (line, holding) {
		rec.Seq = j.next
		if !stamped { // once: appendLine may ask again after a rotation
			rec.Time, stamped = j.opts.Now().UTC(), true
		}
		lazy = j.freshFor(rec)
		how := holdCarried
		switch {
		case hold:
			how = holdDescribed
		case lazy: // needs no sync: written, no attribute set for it
			how = writeIntent
		}
		return intentLine(rec), how
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
// position the line ends at, for syncTo. An end done is held (ends.go).
func (j *Journal) appendLine(mk func() line) (uint64, error) {
	return j.appendLineHeld(func() (line, holding) { return mk(), writeIntent })
}

// holding is how appendLineHeld may hold an intent rather than write it.
type holding int

const (
	writeIntent   holding = iota // written now
	holdDescribed                // held: its kept/ entry says it (described.go)
	holdCarried                  // held where the carry takes it (package carry)
)

// appendLineHeld is appendLine where mk also says how its intent may be
// held with the ends: a removal's whose kept/ entry says it, or one the
// carry takes (then the position returned is 0: nothing to sync). Held
// lines are written, in order, before any later line, so that the
// segments still hold intents in ascending seq.
func (j *Journal) appendLineHeld(mk func() (line, holding)) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		if j.closed {
			return 0, ErrClosed
		}
		l, how := mk()
		if l.Op != "" && j.failed != nil {
			return 0, j.failed // nothing is durable since: no new change
		}
		j.encoded = appendLineJSON(j.encoded[:0], &l)
		b := j.encoded
		if int64(len(b)) > j.opts.SegmentSize/2 {
			return 0, fmt.Errorf("journal: record %d is %d bytes, more than half a segment", l.Seq, len(b))
		}
		if l.Op != "" {
			if err := j.takeRoomLocked(int64(len(b))); err != nil {
				return 0, err
			}
		}
		held := l.Op == "" && l.End == Done || how == holdDescribed && l.Op != ""
		if fits := j.cur != nil && len(j.ends)+len(b) <= j.holdMax(); fits && (held || j.carries(&l, how, b)) {
			if l.Op != "" {
				j.intentAppended()
			}
			j.hold(b, &l)
			j.arm(j.flushEnds)
			if how == holdCarried {
				return 0, nil
			}
			return j.written, nil
		}
		// The held lines and this one in one write, in the held lines'
		// buffer; b taken back off it where the segment has no room.
		out, before := b, len(j.ends)
		if before > 0 {
			j.ends = append(j.ends, b...)
			out = j.ends
		}
		if cur := j.cur; cur != nil && cur.off+int64(len(out)) <= cur.cap {
			if err := j.writeLocked(out); err != nil {
				j.ends = j.ends[:before]
				return 0, err
			}
			j.noteIn(cur, &l)
			if l.Op != "" {
				j.intentAppended()
			}
			return j.written, nil
		}
		j.ends = j.ends[:before]
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

// takeRoomLocked takes from Options.Room the bytes an intent of n bytes
// (and the lines held before it) would add past what the segment appended
// to had allocated: blocks the daemon would allocate as root, which on a
// full disk are root's reserve (fusefs/diskroom). Refused, the intent is
// not appended (a RoomError: its change is ENOSPC) and Prune is asked to
// make room (squeezed). Ends are not taken from the room: each follows an
// intent that was, and the next intent pays for them. Under mu.
func (j *Journal) takeRoomLocked(n int64) error {
	cur := j.cur
	if j.opts.Room == nil || cur == nil {
		return nil
	}
	end, paid := cur.off+int64(len(j.ends))+n, max(cur.alloc, cur.paid)
	if end <= paid {
		return nil
	}
	if refused, first := j.opts.Room(end - paid); refused {
		j.squeezed.Store(true)
		j.signalGrown()
		return &RoomError{First: first}
	}
	j.addHeld(end-paid, 0) // blocks the segment grows by, counted as kept objects' are
	cur.paid = end
	return nil
}

// carries reports whether the carry took l (b encoded), an intent that
// may be held so (how): on ext4 with a jbd2 journal, whose attribute set
// is durable before the change that follows it (package carry). Under mu.
func (j *Journal) carries(l *line, how holding, b []byte) bool {
	return how == holdCarried && l.Op != "" && j.carry != nil && j.carry.Add(b, max(j.completed, j.durable))
}

// intentAppended counts an intent appended (written or held): the next
// seq, and Grown every growEvery. Under mu.
func (j *Journal) intentAppended() {
	j.next++
	if j.sinceGrown++; j.sinceGrown >= growEvery {
		j.sinceGrown = 0
		j.signalGrown()
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
	// Counted, not signalled: a rotation because a segment filled
	// signals Grown (appendLine), one of Prune's is its own.
	var st unix.Stat_t
	if dirfd.Fstat(int(seg.f.Fd()), &st) == nil {
		seg.alloc = st.Blocks * 512
		j.heldBytes.Add(seg.alloc)
	}
	j.heldFiles.Add(1)
	j.lastNum = seg.num
	seg.tallied = j.tallying
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

// settle makes the intent appended up to pos, and the links into kept/
// up to gen, durable (Options.Durable), or writes it through where the
// filesystem orders what follows it (Options.Ordered), or for an op of
// writeThroughOps where the filesystem's fsyncs flush.
func (j *Journal) settle(op Op, pos, gen uint64) error {
	return j.syncTo(pos, gen, !j.flush.Through(writeThroughOps[op], gen))
}

// syncTo returns once the records up to pos and the links into kept/ up
// to gen are durable, or, !flush, once the records up to pos are written
// to the device (gen 0). One caller at a time syncs (the group commit's
// leader), everything appended and linked until it starts: those that
// come meanwhile wait for it, and then find their records synced or sync
// together in the next round. A sync that fails fails every later one:
// the page cache's state is unknown after it (fsync's errors are reported
// once), so nothing more is promised durable.
func (j *Journal) syncTo(pos, gen uint64, flush bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		switch {
		case j.failed != nil:
			return j.failed
		case j.durable >= pos && j.keptDurable >= gen:
			return nil
		case !flush && j.completed >= pos:
			return nil
		case !j.syncing:
			j.syncRound(flush)
		default:
			j.synced.Wait()
		}
	}
}

// syncRound is one group commit, entered and left under mu, which it lets
// go of while it syncs.
func (j *Journal) syncRound(flush bool) {
	j.syncing = true
	written, keptGen := j.written, j.keptGen
	fd := -1
	if j.cur != nil && j.durable < written {
		fd = int(j.cur.f.Fd())
	}
	needKept := flush && j.keptDurable < keptGen
	j.mu.Unlock()
	err := j.flush.Round(flush, needKept, fd, j.keptRead)
	j.mu.Lock()
	j.syncing = false
	if err != nil {
		j.failed = err
	} else {
		j.completed = max(j.completed, written)
		if flush {
			j.durable = max(j.durable, written)
			j.keptDurable = max(j.keptDurable, keptGen)
		}
	}
	j.synced.Broadcast()
}

// holdMax is how many bytes of lines are held at most: past it the next
// line is written with them. Held lines and a line (at most half a
// segment) fit in one segment together.
func (j *Journal) holdMax() int {
	return int(min(endsHeldMax, j.opts.SegmentSize/2))
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
	if j.carry != nil {
		j.carry.Written(j.written)
	}
	for i := range j.intents {
		j.noteIn(cur, &j.intents[i])
	}
	if j.endsMax != 0 {
		cur.note(&line{Seq: j.endsMax})
	}
	j.drop()
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

// WriteHeld writes the ends held, so that a reader of the segments beside
// the daemon (realmfs journal list, asking the daemon first) finds every
// change that has ended ended.
func (j *Journal) WriteHeld() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	return j.writeEndsLocked()
}

// flushEnds is the timer's: it writes the ends held, and holds the timer
// armed while some are left.
func (j *Journal) flushEnds() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.armed = false // fired (or set again since, then firing again later: harmless)
	if j.closed {
		return
	}
	if err := j.writeEndsLocked(); err != nil || len(j.ends) > 0 {
		// Tried again later, or with the next intent, which reports it.
		j.arm(j.flushEnds)
	}
}
