package dirfd

import "golang.org/x/sys/unix"

// The calls on an open file that the journal (fusefs/journal) makes on
// its own files beneath BACKING: its segments, kept durable by
// preallocation and fdatasync, and the flock of its one writer. Each
// acts on the object fd holds and names nothing.

// Fsync makes the object fd holds durable: its data and its metadata (a
// directory's entries, for an fd of one opened for reading: ReopenDir).
func Fsync(fd int) error {
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}

// Fdatasync makes the data of the file fd holds durable, and of its
// metadata only what reading that data needs (its size): on a file whose
// blocks are written already (preallocated and zeroed), the data alone.
func Fdatasync(fd int) error {
	return ignoringEINTR(func() error { return unix.Fdatasync(fd) })
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
