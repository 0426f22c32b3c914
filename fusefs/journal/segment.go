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
	"github.com/realm-dev/realm/fusefs/journal/segfile"
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
	f           *segfile.File // appends copied into its mapping (segfile.Map)
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
// large folios, which the appends to the last segment after a mount
// would walk buffer by buffer (segfile.ZeroPages), and the read asks for
// the whole segment anyway.
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
// much of it as the filesystem's free space allows
// (segfile.PreallocSize). With durable its preallocated blocks are
// written (zeros) and made durable, and its name: an append's fdatasync
// then flushes the record's data only, no block allocation nor unwritten
// extent to convert, no size to change. Past them, appends extend the file: slower to sync, but a
// filesystem short of space still records the changes it has room for.
func makeSegment(log int, num uint64, size int64, durable bool) (*segment, error) {
	fd, err := dirfd.Open(log, segmentName(num), unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: making log/%s: %w", segmentName(num), err)
	}
	f := segfile.NewFile(fd, segmentName(num))
	err = segfile.Preallocate(f.File, segfile.PreallocSize(fd, size), durable)
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
	return &segment{num: num, f: f.Mapped(), cap: size}, nil
}

// openSegment opens the last segment, num, to append to it at off, its
// bytes from off to dirty (a torn line) zeroed first.
func openSegment(log int, seg *segment, off, dirty int64, durable bool) error {
	fd, err := dirfd.Open(log, segmentName(seg.num), unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("journal: opening log/%s: %w", segmentName(seg.num), err)
	}
	f := segfile.NewFile(fd, segmentName(seg.num))
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		f.Close()
		return fmt.Errorf("journal: log/%s: %w", segmentName(seg.num), err)
	}
	if dirty > off {
		err = segfile.ZeroPages(f.File, off, dirty)
		if err == nil && durable {
			err = dirfd.Fdatasync(fd)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("journal: cutting the torn tail of log/%s: %w", segmentName(seg.num), err)
		}
	}
	seg.f, seg.off, seg.cap, seg.alloc = f.Mapped(), off, st.Size, st.Blocks*512
	return nil
}
