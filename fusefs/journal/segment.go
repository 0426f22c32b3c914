package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
)

// segment is one file of log/: records appended from offset 0, the rest
// of its preallocated size zeros.
type segment struct {
	num uint64
	// last: the highest seq of the intents it holds (0: none), intents
	// how many; max, the highest seq of any of its records, ends
	// included; newest, the time of its newest intent; kept, the seqs of
	// its intents with a kept object.
	last, max uint64
	intents   int
	newest    time.Time
	kept      []uint64
	// weight: its blocks and its kept objects' as Prune last weighed them
	// once it was no longer appended to (0: not yet), and files, the
	// segment and its kept objects then in kept/; see weigh.
	weight, files int64
	// tallyBytes, tallyFiles: what its kept objects added to Held as
	// they were kept (Journal.countKept), which weigh takes for theirs
	// where tallied: the segment was made after Open's recovery, which
	// appends what a crash lost uncounted.
	tallyBytes, tallyFiles int64
	tallied                bool
	// Of the segment appended to: its file, where the next record goes,
	// and its size; alloc, the bytes its blocks held when it was made or
	// opened (its preallocation), and paid, how far past them its lines
	// have taken BACKING's room (Options.Room).
	f           *os.File
	off, cap    int64
	alloc, paid int64
}

// segmentName is the name of segment num in log/.
func segmentName(num uint64) string { return fmt.Sprintf("%08d%s", num, segmentSuffix) }

// segmentNum parses a segment's name.
func segmentNum(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && n > 0
}

// note records an intent or an end of the segment in its summary.
func (s *segment) note(l *line) {
	s.max = max(s.max, l.Seq)
	if l.Op == "" {
		return
	}
	s.last = l.Seq
	s.intents++
	if l.Time.After(s.newest) {
		s.newest = l.Time
	}
	if l.Kept {
		s.kept = append(s.kept, l.Seq)
	}
}

// scan is a segment's bytes read: its whole records, where they end, and
// where the bytes after them that are not zeros end.
type scan struct {
	lines []line
	valid int64 // the end of the last whole record
	dirty int64 // the end of the last byte that is not zero (≥ valid)
}

// parseSegment reads the records of data: whole lines, each a record,
// up to the first that is not (a zero byte where a line would start: the
// preallocated rest; a line with no newline or one that does not parse:
// a torn tail).
func parseSegment(data []byte) scan {
	var s scan
	for p := 0; p < len(data) && data[p] != 0; {
		nl := bytes.IndexByte(data[p:], '\n')
		if nl < 0 {
			break
		}
		l, err := decodeLine(data[p : p+nl])
		if err != nil {
			break
		}
		s.lines = append(s.lines, l)
		p += nl + 1
		s.valid = int64(p)
	}
	s.dirty = s.valid
	for i := len(data) - 1; int64(i) >= s.valid; i-- {
		if data[i] != 0 {
			s.dirty = int64(i) + 1
			break
		}
	}
	return s
}

// readSegment reads segment num's first limit bytes (all of it: limit
// < 0), with no readahead: what readahead brings into the page cache are
// large folios, which the appends to the last segment after a mount would
// walk buffer by buffer (zeroPages), and the read asks for the whole
// segment anyway.
func readSegment(log int, num uint64, limit int64) ([]byte, error) {
	fd, err := dirfd.Open(log, segmentName(num), unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), segmentName(num))
	defer f.Close()
	if err := jdir.Regular(fd, "log/"+segmentName(num)); err != nil {
		return nil, err
	}
	dirfd.ReadRandomly(fd) // advice: where it is refused, the read is as before
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit)
	}
	return io.ReadAll(r)
}

// listSegments returns the numbers of log/'s segments, ascending.
func listSegments(log int) ([]uint64, error) {
	ents, err := dirfd.ReadDir(log)
	if err != nil {
		return nil, fmt.Errorf("journal: listing log/: %w", err)
	}
	var nums []uint64
	for _, e := range ents {
		if n, ok := segmentNum(e.Name); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// makeSegment makes segment num, rotated at size, preallocated to as
// much of it as the filesystem's free space allows (preallocSize). With
// durable its preallocated blocks are written (zeros) and made durable,
// and its name: an append's fdatasync then flushes the record's data
// only, no block allocation nor unwritten extent to convert, no size to
// change. Past them, appends extend the file: slower to sync, but a
// filesystem short of space still records the changes it has room for.
func makeSegment(log int, num uint64, size int64, durable bool) (*segment, error) {
	fd, err := dirfd.Open(log, segmentName(num), unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: making log/%s: %w", segmentName(num), err)
	}
	f := os.NewFile(uintptr(fd), segmentName(num))
	err = preallocate(f, preallocSize(fd, size), durable)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		err = f.Truncate(0) // no room even for that: appends allocate as they go
	}
	if err != nil {
		f.Close()
		dirfd.Unlink(log, segmentName(num), 0)
		return nil, fmt.Errorf("journal: preallocating log/%s: %w", segmentName(num), err)
	}
	if durable {
		if err := dirfd.SyncDir(log); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: syncing log/: %w", err)
		}
	}
	return &segment{num: num, f: f, cap: size}, nil
}

// minPrealloc is the least worth preallocating: below it, none.
const minPrealloc = 64 << 10

// preallocSize is how much of a segment of size to preallocate on the
// filesystem of fd: all of it where it takes at most a sixteenth of the
// free space, else that sixteenth (in 4 KiB blocks), none below
// minPrealloc. A segment never takes the room the changes it records
// need.
func preallocSize(fd int, size int64) int64 {
	var st unix.Statfs_t
	if dirfd.Fstatfs(fd, &st) != nil {
		return size
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if n := free / 16 &^ 4095; n < size {
		if n < minPrealloc {
			return 0
		}
		return n
	}
	return size
}

// preallocate gives f size bytes of zeros: allocated (fallocate; a sparse
// size where the filesystem has no fallocate) and, with durable, written
// (zeroPages) and synced.
func preallocate(f *os.File, size int64, durable bool) error {
	if size == 0 {
		return nil
	}
	fd := int(f.Fd())
	if err := dirfd.Fallocate(fd, 0, 0, size); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
		if err := f.Truncate(size); err != nil {
			return err
		}
	}
	if !durable {
		return nil
	}
	if err := zeroPages(f, 0, size); err != nil {
		return err
	}
	return dirfd.Fdatasync(fd)
}

// zeroPages writes zeros to f from off to end, one page a write. A write
// the size of a page leaves a page of the cache behind it; a larger one
// can leave a large folio (ext4 has them since Linux 6.16), which every
// later write into it walks block by block, preparing and then committing
// each of its buffers: a 300-byte append into a segment zeroed 1 MiB a
// write cost 5.4 to 6.5 µs, 2.9 to 3.7 µs into one zeroed a page a write
// (docs/PERFORMANCE.md), and the segment's appends are most of the
// journal's system calls.
func zeroPages(f *os.File, off, end int64) error {
	page := int64(os.Getpagesize())
	zeros := make([]byte, page)
	for off < end {
		n := min(page-off%page, end-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// openSegment opens the last segment, num, to append to it at off, its
// bytes from off to dirty (a torn line) zeroed first.
func openSegment(log int, seg *segment, off, dirty int64, durable bool) error {
	fd, err := dirfd.Open(log, segmentName(seg.num), unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("journal: opening log/%s: %w", segmentName(seg.num), err)
	}
	f := os.NewFile(uintptr(fd), segmentName(seg.num))
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		f.Close()
		return fmt.Errorf("journal: log/%s: %w", segmentName(seg.num), err)
	}
	if dirty > off {
		err = zeroPages(f, off, dirty)
		if err == nil && durable {
			err = dirfd.Fdatasync(fd)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("journal: cutting the torn tail of log/%s: %w", segmentName(seg.num), err)
		}
	}
	seg.f, seg.off, seg.cap, seg.alloc = f, off, st.Size, st.Blocks*512
	return nil
}
