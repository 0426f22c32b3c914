package dirfd

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The calls on an open file that the journal (fusefs/journal) makes on
// its own files beneath BACKING: its segments, kept durable by
// preallocation and fdatasync, and the flock of its one writer. Each
// acts on the object fd holds and names nothing.

// syncs counts the fsyncs and fdatasyncs made through this package.
var syncs atomic.Uint64

// Syncs is how many fsyncs and fdatasyncs the process has made through
// this package: the daemon's Ps follow their rate (internal/adaptprocs).
func Syncs() uint64 { return syncs.Load() }

// Fsync makes the object fd holds durable: its data and its metadata (a
// directory's entries, for an fd of one opened for reading: ReopenDir).
func Fsync(fd int) error {
	syncs.Add(1)
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}

// Fdatasync makes the data of the file fd holds durable, and of its
// metadata only what reading that data needs (its size): on a file whose
// blocks are written already (preallocated and zeroed), the data alone.
func Fdatasync(fd int) error {
	syncs.Add(1)
	return ignoringEINTR(func() error { return unix.Fdatasync(fd) })
}

// WriteOut writes the dirty pages of the file fd holds to the device and
// waits for those writes to complete (sync_file_range with WAIT_BEFORE,
// WRITE and WAIT_AFTER), with no flush of the device's cache: the data is
// durable once a flush is issued after WriteOut returns (the journal's
// write-through, fusefs/journal/logsync). It writes no metadata, so it
// is for a file whose blocks are allocated and written already.
func WriteOut(fd int) error {
	const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	return ignoringEINTR(func() error { return unix.SyncFileRange(fd, 0, 0, all) })
}

// ReadRandomly tells the kernel that the file fd holds is read without
// readahead (POSIX_FADV_RANDOM): each read brings in the pages it asks
// for, as pages of their own, not the large folios readahead makes
// (fusefs/journal's segments, which are appended to a line at a time).
func ReadRandomly(fd int) error {
	return ignoringEINTR(func() error { return unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM) })
}

// Fallocate allocates (mode 0) or changes the blocks of the file fd holds
// in [off, off+size), as fallocate(2) does.
func Fallocate(fd int, mode uint32, off, size int64) error {
	return ignoringEINTR(func() error { return unix.Fallocate(fd, mode, off, size) })
}

// Flock takes or lets go of a whole-file lock on the open file fd holds,
// as flock(2) does (how: LOCK_EX, LOCK_SH, LOCK_UN, with LOCK_NB not to
// wait). A lock belongs to the open file description: another open of the
// same file, even by the same process, conflicts with it.
func Flock(fd int, how int) error {
	return ignoringEINTR(func() error { return unix.Flock(fd, how) })
}
