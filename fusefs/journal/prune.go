package journal

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// PruneStats is what a Prune dropped.
type PruneStats struct {
	Segments int   // segments removed
	Records  int   // intents in them
	Kept     int   // kept objects removed
	Bytes    int64 // their blocks (a kept object's only where the journal held its only link)
}

// pruneSeg is a segment as Prune weighs it.
type pruneSeg struct {
	num     uint64
	last    uint64
	intents int
	newest  time.Time
	kept    []uint64
	bytes   int64
}

// Prune applies the bounds: whole segments are dropped, oldest first,
// with the kept objects of their records, while the segments' and the
// kept objects' blocks exceed maxBytes (≤ 0: no bound) or a segment's
// newest record is older than keep (≤ 0: no bound). Before anything is
// removed, pruned is made to name the last seq dropped (Pruned), so that
// a crash in between leaves nothing Open does not finish removing. The
// segment appended to, if dropped, is rotated first. A Prune while
// another runs returns at once, having done nothing.
func (j *Journal) Prune(maxBytes int64, keep time.Duration) (PruneStats, error) {
	var stats PruneStats
	if !j.pruning.CompareAndSwap(false, true) {
		return stats, nil
	}
	defer j.pruning.Store(false)
	segs, cur, err := j.weigh()
	if err != nil {
		return stats, err
	}
	var total int64
	for _, s := range segs {
		total += s.bytes
	}
	cutoff := j.opts.Now().Add(-keep)
	n := 0
	for ; n < len(segs); n++ {
		s := segs[n]
		if s.num == cur && s.last == 0 {
			break // nothing to drop: dropping it would only rotate
		}
		over := maxBytes > 0 && total > maxBytes
		old := keep > 0 && s.newest.Before(cutoff)
		if !over && !old {
			break
		}
		total -= s.bytes
	}
	if n == 0 {
		return stats, nil
	}
	drop := segs[:n]
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
		if err := writePruned(j.dir, last); err != nil {
			return stats, err
		}
	}
	j.mu.Lock()
	j.segs = j.segs[n:]
	j.pruned.Store(last)
	j.mu.Unlock()
	return j.remove(drop)
}

// weigh returns the segments, oldest first, each with its blocks and its
// kept objects' (those whose only link the journal holds), and the number
// of the one appended to (0: none).
func (j *Journal) weigh() ([]pruneSeg, uint64, error) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, 0, ErrClosed
	}
	segs := make([]pruneSeg, 0, len(j.segs))
	for _, s := range j.segs {
		segs = append(segs, pruneSeg{num: s.num, last: s.last, intents: s.intents, newest: s.newest, kept: append([]uint64(nil), s.kept...)})
	}
	var cur uint64
	if j.cur != nil {
		cur = j.cur.num
	}
	j.mu.Unlock()
	for i := range segs {
		var st unix.Stat_t
		if err := dirfd.Lstat(j.log, segmentName(segs[i].num), &st); err != nil {
			return nil, 0, fmt.Errorf("journal: log/%s: %w", segmentName(segs[i].num), err)
		}
		segs[i].bytes = st.Blocks * 512
		for _, seq := range segs[i].kept {
			if dirfd.Lstat(j.kept, keptEntry(seq), &st) == nil && (st.Nlink == 1 || st.Mode&unix.S_IFMT == unix.S_IFDIR) {
				segs[i].bytes += st.Blocks * 512
			}
		}
	}
	return segs, cur, nil
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

// remove removes the dropped segments' files and kept objects.
func (j *Journal) remove(drop []pruneSeg) (PruneStats, error) {
	var stats PruneStats
	var errs []error
	for _, s := range drop {
		for _, seq := range s.kept {
			if err := removeKept(j.kept, keptEntry(seq)); err != nil {
				errs = append(errs, fmt.Errorf("journal: removing kept/%d: %w", seq, err))
				continue
			}
			j.forgetKept(seq)
			stats.Kept++
		}
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

// writePruned makes pruned name seq, durably: a temp written, synced and
// renamed over it, the directory synced.
func writePruned(dir int, seq uint64) error {
	if err := dirfd.Unlink(dir, prunedTemp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("journal: removing %s: %w", prunedTemp, err)
	}
	fd, err := dirfd.Open(dir, prunedTemp, unix.O_WRONLY|unix.O_CREAT, 0o600)
	if err != nil {
		return fmt.Errorf("journal: making %s: %w", prunedTemp, err)
	}
	f := os.NewFile(uintptr(fd), prunedTemp)
	_, err = f.Write([]byte(strconv.FormatUint(seq, 10) + "\n"))
	if err == nil {
		err = dirfd.Fdatasync(fd)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dirfd.Rename(dir, prunedTemp, dir, prunedName, 0)
	}
	if err == nil {
		err = dirfd.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("journal: writing %s: %w", prunedName, err)
	}
	return nil
}
