package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/readhold"
	"github.com/realm-dev/realm/fusefs/writeengine"
)

// inPlaceHandle is an open of a coordinated file, read and written in
// place (writeengine.InPlace, where coordinated files are explained).
type inPlaceHandle struct {
	handle
	file *writeengine.InPlace
	// counted: the handle is counted on its node (Node.opens); a
	// handle made for the daemon's own use (truncate by name) is not.
	// passthrough: the kernel serves it from its fd (passthroughInPlace).
	counted, passthrough bool
	reads                readhold.Holds // reads go-fuse has yet to make from the fd
}

var (
	_ = (fs.FileReader)((*inPlaceHandle)(nil))
	_ = (fs.FileWriter)((*inPlaceHandle)(nil))
	_ = (fs.FileFlusher)((*inPlaceHandle)(nil))
	_ = (fs.FileFsyncer)((*inPlaceHandle)(nil))
	_ = (fs.FileReleaser)((*inPlaceHandle)(nil))
	_ = (fs.FileLseeker)((*inPlaceHandle)(nil))
	_ = (openFile)((*inPlaceHandle)(nil))
)

// passthroughInPlace is an in-place handle the kernel serves straight from
// its fd (read-write, registered by go-fuse as the node's backing file):
// reads, writes and mappings never reach the daemon.
type passthroughInPlace struct{ *inPlaceHandle }

var _ = (fs.FilePassthroughFder)((*passthroughInPlace)(nil))

// PassthroughFd lets go-fuse register the handle's fd with the kernel.
func (p *passthroughInPlace) PassthroughFd() (int, bool) { return p.file.Fd(), true }

// Read reads the file (fusefs/readhold).
func (h *inPlaceHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.reads.Read(h.file.Fd(), buf, off)
}

// Write writes the file in place.
func (h *inPlaceHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, errno := h.file.Write(ctx, data, off)
	return uint32(n), errno
}

// Flush has nothing to do (the kernel is asked not to send it).
func (h *inPlaceHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// fsyncDataOnly is FUSE_FSYNC_FDATASYNC, the FSYNC flag of fdatasync(2)
// (include/uapi/linux/fuse.h), which go-fuse does not name.
const fsyncDataOnly = 1 << 0

// Fsync syncs the file: its data only for fdatasync(2).
func (h *inPlaceHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.file.Fsync(flags&fsyncDataOnly != 0)
}

// Release ends the handle when its last descriptor is gone (and its last
// mapping): its record locks are dropped and its fd closes once go-fuse
// has done with every read of it.
func (h *inPlaceHandle) Release(ctx context.Context) syscall.Errno {
	if !h.release() {
		return syscall.EBADF
	}
	if h.counted {
		h.node.opens.InPlaceGone(h.passthrough)
	}
	return dirfd.Errno(h.reads.Close(h.file.Fd()))
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the file.
func (h *inPlaceHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the handle's fd.
func (h *inPlaceHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno { return fn(h.file.Fd()) }

// answersFor is always true: a coordinated file has one view.
func (h *inPlaceHandle) answersFor(ctx context.Context) bool { return true }
