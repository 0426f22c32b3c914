package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// handle is what both kinds of file handle of the mount have: the node
// they were opened on, and the lockers that took record locks through them
// (reclock.go), whose locks go when the handle is released, as close(2)
// drops them natively.
type handle struct {
	node *Node

	// mu guards released and lockers.
	mu       lockorder.Mutex[lockorder.HandleMu]
	released bool
	lockers  map[uint64]bool // lockers (reclock.go) that took locks through this handle
}

// common returns the part both kinds of handle share.
func (h *handle) common() *handle { return h }

// noteLocker remembers that locker took a lock through h, to be dropped at
// h's release.
func (h *handle) noteLocker(locker uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lockers == nil {
		h.lockers = make(map[uint64]bool)
	}
	h.lockers[locker] = true
}

// release marks h released and drops the record locks taken through h:
// the kernel releases a handle when its last descriptor closes. It
// reports false if h was released already.
func (h *handle) release() bool {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return false
	}
	h.released = true
	lockers := h.lockers
	h.mu.Unlock()
	for locker := range lockers {
		h.node.fsys.heirs.Drop(&h.node.recLocks, locker)
	}
	return true
}

// openFile is a file handle of this mount, of either kind. Both serve the
// same FUSE calls on a handle; the node's calls that are handed one (a
// stat, record locks) ask it for the content it sees and whose view that
// is (views.go).
type openFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileReleaser
	fs.FileLseeker

	common() *handle
	// withFd runs fn on the fd holding the content the handle sees.
	withFd(fn func(fd int) syscall.Errno) syscall.Errno
	// answersFor reports whether that content is the caller's view.
	answersFor(ctx context.Context) bool
}

var (
	_ = (fs.NodeOpener)((*Node)(nil))
	_ = (fs.NodeCreater)((*Node)(nil))
	_ = (fs.NodeAllocater)((*Node)(nil))
	_ = (fs.NodeCopyFileRanger)((*Node)(nil))
	_ = (fs.NodeGetlker)((*Node)(nil))
	_ = (fs.NodeSetlker)((*Node)(nil))
	_ = (fs.NodeSetlkwer)((*Node)(nil))
)

// fileOf returns the handle of this mount behind fh, nil (an untyped nil)
// for any other.
func fileOf(fh fs.FileHandle) openFile {
	switch h := fh.(type) {
	case *readHandle:
		return h
	case *passthroughFile:
		return h.readHandle
	case *writeHandle:
		return h
	case *inPlaceHandle:
		return h
	case *passthroughInPlace:
		return h.inPlaceHandle
	}
	return nil
}

// seek answers SEEK_DATA and SEEK_HOLE on the content h sees.
func seek(h openFile, off uint64, whence uint32) (uint64, syscall.Errno) {
	var n int64
	errno := h.withFd(func(fd int) syscall.Errno {
		var err error
		n, err = unix.Seek(fd, int64(off), int(whence))
		return dirfd.Errno(err)
	})
	return uint64(n), errno
}

// openErrno keeps ENOSYS and EOPNOTSUPP from reaching the kernel as the
// answer to an open: ENOSYS to OPEN (or OPENDIR) makes the kernel stop
// sending them for the rest of the connection, and with them every check
// the guard makes at open. A backing filesystem that lacks a call is an
// I/O error here.
func openErrno(errno syscall.Errno) syscall.Errno {
	if errno == syscall.ENOSYS || errno == syscall.EOPNOTSUPP {
		return syscall.EIO
	}
	return errno
}
