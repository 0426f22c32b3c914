// Package segfile prepares the files of the journal's log/: the blocks a
// segment is given when it is made (preallocated, and with durability
// written as zeros and synced), so that an append neither allocates nor
// converts an extent, the zeros that cut a torn tail, and the mapping an
// append copies its line into (mapping.go). It is a package
// of its own because it knows nothing of records: only a file, its
// filesystem's free space and its page cache.
package segfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// minPrealloc is the least worth preallocating: below it, none.
const minPrealloc = 64 << 10

// PreallocSize is how much of a segment of size to preallocate on the
// filesystem of fd: all of it where it takes at most a sixteenth of the
// free space, else that sixteenth (in 4 KiB blocks), none below
// minPrealloc. A segment never takes the room the changes it records
// need.
func PreallocSize(fd int, size int64) int64 {
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

// Preallocate gives f size bytes of zeros: allocated (fallocate; a sparse
// size where the filesystem has no fallocate) and, with durable, written
// (ZeroPages) and synced.
func Preallocate(f *os.File, size int64, durable bool) error {
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
	if err := ZeroPages(f, 0, size); err != nil {
		return err
	}
	return dirfd.Fdatasync(fd)
}

// ZeroPages writes zeros to f from off to end, one page a write. A write
// the size of a page leaves a page of the cache behind it; a larger one
// can leave a large folio (ext4 has them since Linux 6.16), which every
// later write into it walks block by block, preparing and then committing
// each of its buffers: a 300-byte append into a segment zeroed 1 MiB a
// write cost 5.4 to 6.5 µs, 2.9 to 3.7 µs into one zeroed a page a write
// (docs/PERFORMANCE.md), and the segment's appends are most of the
// journal's system calls.
func ZeroPages(f *os.File, off, end int64) error {
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
