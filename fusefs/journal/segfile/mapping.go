package segfile

import (
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// A segment's appends by copy into a shared mapping of its preallocated
// blocks, not by pwrite(2). Each write(2) to a file updates its mtime and
// ctime, and on ext4 that dirties the inode in a jbd2 handle: in the
// daemon, beside the commits' fsyncs, 11 of the 24 µs of samples an
// intent's pwrite cost (docs/PERFORMANCE.md). A store into a shared
// mapping is in the page cache when the copy returns, as a written line
// is (a kill -9 of the daemon loses nothing), and the file's times and
// its inode change only at a page's first store after its writeback
// (page_mkwrite), not at every line. fdatasync and sync_file_range write
// the pages out as they write pages written by write(2).

// File is a segment's file open for appends: its WriteAt copies into
// the mapping where that holds the bytes, and writes them otherwise.
type File struct {
	*os.File
	m Mapping
}

// NewFile is the segment file fd, named name, not mapped yet (Mapped).
func NewFile(fd int, name string) *File { return &File{File: os.NewFile(uintptr(fd), name)} }

// Mapped maps f's bytes (the package's Map) and returns f: once its
// blocks are preallocated, or its torn tail cut.
func (f *File) Mapped() *File {
	f.m = Map(f.File)
	return f
}

// WriteAt writes b at off, by copy where the mapping holds [off,
// off+len(b)) and did not fault.
func (f *File) WriteAt(b []byte, off int64) (int, error) {
	if f.m.WriteAt(b, off) {
		return len(b), nil
	}
	return f.File.WriteAt(b, off)
}

// Close unmaps and closes f.
func (f *File) Close() error {
	f.m.Close()
	return f.File.Close()
}

// Mapping is a segment file's bytes mapped shared for writing, or none.
type Mapping struct{ b []byte }

// Map maps f's bytes shared for writing where every one of them has its
// block (Preallocate's fallocate): a store into a hole would allocate in
// the page fault, and a filesystem out of room answers that with SIGBUS.
// A file not wholly allocated, or one the kernel will not map, is left
// unmapped: its appends are written (WriteAt reports false).
func Map(f *os.File) Mapping {
	var st unix.Stat_t
	fd := int(f.Fd())
	if dirfd.Fstat(fd, &st) != nil || st.Size <= 0 || st.Blocks*512 < st.Size || st.Size != int64(int(st.Size)) {
		return Mapping{}
	}
	b, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return Mapping{}
	}
	return Mapping{b: b}
}

// WriteAt copies b into the mapping at off, and reports whether it did:
// false where the mapping does not hold all of [off, off+len(b)), or
// where the copy faulted (the file was cut behind the daemon, or its
// filesystem refused a page: SIGBUS, turned into a recovered panic). A
// fault drops the mapping; the caller writes b instead, whole.
func (m *Mapping) WriteAt(b []byte, off int64) bool {
	if off < 0 || off+int64(len(b)) > int64(len(m.b)) {
		return false
	}
	if err := copyGuarded(m.b[off:], b); err != nil {
		m.Close()
		return false
	}
	return true
}

// copyGuarded copies src into dst, a fault of the mapping an error.
func copyGuarded(dst, src []byte) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("segfile: the mapping faulted: %v", r)
		}
	}()
	copy(dst, src)
	return nil
}

// Close unmaps the mapping; the file stays open.
func (m *Mapping) Close() {
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}
