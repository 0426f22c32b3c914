package journal

// The journal's bounds (package bounds: bytes, files, age) and Prune,
// which holds the journal to them, its removals paced by the daemon
// (Bounds.Pace). What the journal holds is counted as it keeps
// (docs/JOURNAL.md, Bounds): the bytes of its segments' and kept objects'
// blocks, and the files it holds (its segments and kept/'s entries: each
// an inode of BACKING's filesystem). Open sets both from what is on disk,
// weighed as Prune weighs; every segment made and every object kept adds
// to them, an aborted change's link and an object Restore moves out take
// from them, and each Prune sets them again from what it weighed, less
// what it drops. As soon as either passes its bound (the Bounds the last
// Prune was given) Grown is signalled: a prune then comes after as many
// changes as it takes the pruner to wake, never a segment or 4096 changes
// later. Empty files weigh no blocks, so the files bound is what keeps an
// owner that makes and removes empty files from taking every inode.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/bounds"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
)

// Bounds are what Prune holds the journal to (package bounds).
type Bounds = bounds.Bounds

// Held is what the journal holds now, as counted: the bytes of its
// segments' and kept objects' blocks (as Prune weighs them) and the files
// (segments and kept objects).
func (j *Journal) Held() (bytes, files int64) {
	return j.heldBytes.Load(), j.heldFiles.Load()
}

// addHeld counts bytes and files more (less, negative) held, and signals
// Grown if they grew past the bounds.
func (j *Journal) addHeld(bytes, files int64) {
	b, f := j.heldBytes.Add(bytes), j.heldFiles.Add(files)
	if bytes <= 0 && files <= 0 {
		return
	}
	if bd := j.bounds.Load(); bd != nil && bd.Over(b, f) {
		j.signalGrown()
	}
}

// countKept counts what a kept object of change seq adds to the journal
// (negative: one leaving kept/) in Held and in its segment's tally; where
// seq's intent is held still, for the segment that notes it (noteIn).
// With link (an object kept that is no directory) it also notes kept/<seq>
// as a link to it (noteKeptLocked): one lock for both, on every removal.
func (j *Journal) countKept(seq uint64, bytes, files int64, link *ID) {
	j.addHeld(bytes, files)
	j.mu.Lock()
	defer j.mu.Unlock()
	if link != nil {
		j.noteKeptLocked(*link, seq)
	}
	s, past := j.keptSegment(seq)
	switch {
	case s != nil:
		s.tallyBytes += bytes
		s.tallyFiles += files
	case past: // not noted yet (a segment pruned is no one's to count)
		if j.untallied == nil {
			j.untallied = map[uint64][2]int64{}
		}
		u := j.untallied[seq]
		j.untallied[seq] = [2]int64{u[0] + bytes, u[1] + files}
	}
}

// keptSegment is the segment whose kept list holds seq (nil: none), and
// whether seq is past every intent the segments note. Under mu.
func (t *tail) keptSegment(seq uint64) (*segment, bool) {
	past := true
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		if s.last > 0 && seq > s.last {
			return nil, past // newer than its intents: in no older segment
		}
		past = past && s.last == 0
		if len(s.kept) > 0 && s.kept[0] <= seq {
			if _, ok := slices.BinarySearch(s.kept, seq); ok {
				return s, false
			}
			return nil, false
		}
	}
	return nil, past
}

// noteIn notes l in s (segment.note), with what countKept counted for
// l's kept object before it was written. Under mu.
func (t *tail) noteIn(s *segment, l *line) {
	s.note(l)
	if u, ok := t.untallied[l.Seq]; ok && l.Kept {
		s.tallyBytes += u[0]
		s.tallyFiles += u[1]
		delete(t.untallied, l.Seq)
	}
}

// keptWeight is what an object of st kept in kept/ adds to the count: its
// blocks, and one file. Its blocks are counted even while it has names
// elsewhere (Begin links it before the change that leaves the journal
// its only link): the next Prune weighs it as it is.
func keptWeight(st *unix.Stat_t) int64 { return st.Blocks * 512 }

// measure sets what the journal holds from segs, a weighing of it (Open).
func (j *Journal) measure(segs []pruneSeg) {
	var bytes, files int64
	for _, s := range segs {
		bytes += s.bytes
		files += s.files
	}
	j.heldBytes.Store(bytes)
	j.heldFiles.Store(files)
}

// Statfs is statfs(2) of the journal's filesystem (BACKING's).
func (j *Journal) Statfs(st *unix.Statfs_t) error { return dirfd.Fstatfs(j.dir, st) }

// PruneStats is what a Prune dropped.
type PruneStats struct {
	Segments int   // segments removed
	Records  int   // intents in them
	Kept     int   // kept objects removed
	Bytes    int64 // their blocks (a kept object's only where the journal held its only link)
}

// pruneSeg is a segment as Prune weighs it.
type pruneSeg struct {
	num, last uint64
	intents   int
	newest    time.Time
	kept      []uint64
	tally     *[2]int64 // its kept objects' weight as counted (countKept), for weighOne's lstats
	bytes     int64
	files     int64 // the segment and its kept objects in kept/
}

// Prune applies the bounds b: whole segments are dropped, oldest first,
// with the kept objects of their records, while the segments' and the
// kept objects' blocks exceed b.MaxBytes, or the files they are (the
// segments and kept/'s entries) b.MaxFiles, or a segment's newest record
// is older than b.Keep. pruned names the last seq dropped (Pruned) before
// anything is removed: Open finishes a prune a crash cut. The segment
// appended to, if dropped, is rotated first. Held is set from what was
// weighed less what is dropped; b become the bounds Grown signals past.
// Where Options.Room refused an intent since the last Prune, a segment's
// worth more is dropped, unpaced. A Prune while another runs returns at
// once, having done nothing.
func (j *Journal) Prune(b Bounds) (PruneStats, error) {
	var stats PruneStats
	if !j.pruning.CompareAndSwap(false, true) {
		return stats, nil
	}
	defer j.pruning.Store(false)
	j.bounds.Store(&b)
	heldBytes, heldFiles, err := j.heldWritten()
	if err != nil {
		return stats, err
	}
	squeezed := j.squeezed.Swap(false)
	if !squeezed && j.withinBounds(b, heldBytes, heldFiles) {
		return stats, nil
	}
	segs, cur, err := j.weigh()
	if err != nil {
		return stats, err
	}
	var total, files int64
	for _, s := range segs {
		total += s.bytes
		files += s.files
	}
	// drop: the bounds this Prune drops to. b itself is stored as Grown's
	// (above), which a squeeze must not lower for the changes after it.
	drop := b
	if limit := total - j.opts.SegmentSize; squeezed && (drop.MaxBytes == 0 || limit < drop.MaxBytes) {
		// Options.Room refused an intent: what is dropped frees a
		// segment's worth for the records that come next.
		drop.MaxBytes = max(1, limit) // 0 would be no bound
	}
	cutoff := j.opts.Now().Add(-drop.Keep)
	n := 0
	for ; n < len(segs); n++ {
		s := segs[n]
		if s.num == cur && s.last == 0 {
			break // nothing to drop: dropping it would only rotate
		}
		old := drop.Keep > 0 && s.newest.Before(cutoff)
		if !drop.Over(total, files) && !old {
			break
		}
		total -= s.bytes
		files -= s.files
	}
	// What was kept meanwhile is counted on top of what is left: this
	// weighing replaces the count it started from, not what came since.
	j.heldBytes.Add(total - heldBytes)
	j.heldFiles.Add(files - heldFiles)
	if n == 0 {
		return stats, nil
	}
	if squeezed {
		b.Pace = nil // the disk is full: no waiting
	}
	return j.dropSegs(segs[:n], cur, b)
}

// withinBounds reports whether Prune may skip its weighing: what the
// journal holds, as counted, is within b, no segment is old enough for
// b.Keep, and no renewing weighing is due (renewDue). A Prune every
// growEvery changes weighed the segment appended to each time, an lstat
// per kept object in it: measured, 4 % of the daemon's CPU over an rm -rf
// of 13,000 entries (docs/PERFORMANCE.md). The count errs high (a kept
// object's blocks are counted while it still has other names), and what
// it misses, the host growing a kept object behind the journal, the
// renewing weighing finds.
func (j *Journal) withinBounds(b Bounds, bytes, files int64) bool {
	if j.renewDue() || b.Over(bytes, files) {
		return false
	}
	if b.Keep > 0 {
		j.mu.Lock()
		old := len(j.segs) > 0 && j.segs[0].newest.Before(j.opts.Now().Add(-b.Keep))
		j.mu.Unlock()
		if old {
			return false
		}
	}
	return true
}

// heldWritten writes the lines held, so that every intent counted held
// is in a segment Prune weighs, and returns what the journal holds then.
func (j *Journal) heldWritten() (bytes, files int64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return 0, 0, ErrClosed
	}
	if err := j.writeEndsLocked(); err != nil {
		return 0, 0, err
	}
	bytes, files = j.Held()
	return bytes, files, nil
}

// dropSegs drops the segments of drop, oldest first, the last of which may
// be cur, the one appended to: pruned written first, then their files and
// kept objects removed (paced by b).
func (j *Journal) dropSegs(drop []pruneSeg, cur uint64, b Bounds) (PruneStats, error) {
	var stats PruneStats
	n := len(drop)
	if drop[n-1].num == cur {
		if err := j.rotateFrom(cur); err != nil {
			return stats, err
		}
	}
	last := j.pruned.Load()
	for _, s := range drop {
		last = max(last, s.last)
	}
	if last > j.pruned.Load() {
		if err := jdir.WritePruned(j.dir, last); err != nil {
			return stats, err
		}
	}
	j.mu.Lock()
	j.segs = j.segs[n:]
	j.pruned.Store(last)
	j.mu.Unlock()
	stats, err := j.remove(drop, b)
	j.groups.RemoveThrough(last)
	return stats, err
}

// renewAfter is how long a weighing trusts the weights and tallies of
// the last: the first weighing after it renews every segment's weight by
// lstat. By time, not by a count of weighings: at the bounds every Prune
// weighs, and renewing one in 16 lstat all of kept/ (26,000 entries at
// the default files bound of a 4 GiB filesystem) a few times a second,
// a third of the prune's CPU over an rm -rf (docs/PERFORMANCE.md). What a
// renewal corrects is rare (the host changing kept/ behind the mount, a
// kept object with another name) and errs toward a smaller journal.
const renewAfter = 10 * time.Minute

// renewDue reports whether the next weighing renews every weight: the
// first, and one renewAfter since the last, by the machine's monotonic
// clock (not Options.Now, which stamps records). Under pruning.
func (j *Journal) renewDue() bool {
	return j.renewed.IsZero() || time.Since(j.renewed) >= renewAfter
}

// weigh returns the segments, oldest first, each with its blocks and its
// kept objects' (those whose only link the journal holds), and the number
// of the one appended to (0: none).
//
// A segment no longer appended to keeps its weight from the first
// weighing after it was sealed: its records do not change, and a kept
// object's links change only where a workspace name of it goes, which is
// itself a change whose record keeps it again (a link of its own, in a
// later segment). A segment made since Open is weighed, the first time
// and while appended to, by its own lstat and its tally: its kept
// objects' blocks and entries as countKept counted them when they were
// kept, with no lstat of each (measured: 40 % of a Prune's CPU at the
// bounds, docs/PERFORMANCE.md); a loaded one, by an lstat of each. The
// tally errs high where a kept object keeps another name, and misses
// what the host did to kept/ behind the mount: a weighing renewAfter
// the last renewing one renews every weight by lstat.
func (j *Journal) weigh() ([]pruneSeg, uint64, error) {
	all := j.renewDue()
	if all {
		j.renewed = time.Now()
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, 0, ErrClosed
	}
	segs := make([]pruneSeg, 0, len(j.segs))
	for _, s := range j.segs {
		ps := pruneSeg{num: s.num, last: s.last, intents: s.intents, newest: s.newest, bytes: s.weight, files: s.files}
		if all || s.weight == 0 {
			ps.kept = append([]uint64(nil), s.kept...)
			ps.bytes = -1
			if s.tallied && !all {
				ps.tally = &[2]int64{s.tallyBytes, s.tallyFiles}
			}
		} else {
			ps.kept = s.kept // sealed: never appended to again
		}
		segs = append(segs, ps)
	}
	var cur uint64
	if j.cur != nil {
		cur = j.cur.num
	}
	j.mu.Unlock()
	for i := range segs {
		if segs[i].bytes >= 0 {
			continue
		}
		w, files, err := j.weighOne(segs[i])
		if err != nil {
			return nil, 0, err
		}
		segs[i].bytes, segs[i].files = w, files
		if segs[i].num != cur {
			j.setWeight(segs[i].num, w, files)
		}
	}
	return segs, cur, nil
}

// weighOne is the blocks of segment s and of its kept objects whose only
// link the journal holds, and the files it is: the segment and its kept
// objects still in kept/ (each an entry, whatever its links); with a
// tally, the segment's own and its tally's.
func (j *Journal) weighOne(s pruneSeg) (bytes, files int64, err error) {
	var st unix.Stat_t
	if err := dirfd.Lstat(j.log, segmentName(s.num), &st); err != nil {
		return 0, 0, fmt.Errorf("journal: log/%s: %w", segmentName(s.num), err)
	}
	w, files := st.Blocks*512, int64(1)
	if s.tally != nil {
		return max(w+s.tally[0], 1), files + s.tally[1], nil
	}
	for _, seq := range s.kept {
		if j.lstatKept(seq, &st) != nil {
			continue
		}
		files++
		if st.Nlink == 1 || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			w += keptWeight(&st)
		}
	}
	return max(w, 1), files, nil // 1: weighed, if empty
}

// setWeight keeps w and files as sealed segment num's weight.
func (j *Journal) setWeight(num uint64, w, files int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range j.segs {
		if s.num == num {
			s.weight, s.files = w, files
			return
		}
	}
}

// rotateFrom rotates the segment appended to if it is still num, once no
// group commit is under way.
func (j *Journal) rotateFrom(num uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.syncing {
		j.synced.Wait()
	}
	if j.closed {
		return ErrClosed
	}
	if j.cur == nil || j.cur.num != num {
		return nil
	}
	return j.rotateLocked()
}

// remove removes the dropped segments' files and kept objects, paced by b.
func (j *Journal) remove(drop []pruneSeg, b Bounds) (PruneStats, error) {
	var stats PruneStats
	var errs []error
	var pend [2]int64 // the bytes and files of the segments not yet dropped
	for _, s := range drop {
		pend[0], pend[1] = pend[0]+s.bytes, pend[1]+s.files
	}
	urgent := func() bool {
		bytes, files := j.Held()
		return b.Slackened().Over(bytes+pend[0], files+pend[1])
	}
	for _, s := range drop {
		for _, seq := range s.kept {
			if b.Pace != nil {
				b.Pace(urgent)
			}
			if err := j.removeKeptOf(seq); err != nil {
				errs = append(errs, fmt.Errorf("journal: removing kept/%d: %w", seq, err))
				continue
			}
			j.forgetKept(seq)
			stats.Kept++
		}
		pend[0], pend[1] = pend[0]-s.bytes, pend[1]-s.files
		if err := dirfd.Unlink(j.log, segmentName(s.num), 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("journal: removing log/%s: %w", segmentName(s.num), err))
			continue
		}
		stats.Segments++
		stats.Bytes += s.bytes
		stats.Records += s.intents
	}
	return stats, errors.Join(errs...)
}
