package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/readhold"
	"github.com/realm-dev/realm/fusefs/writeengine"
)

// writeHandle is a handle over an owner's write in progress on the file
// (its pendingWrite, on the owner's lock-table entry): each kernel event
// on it is one call of its writeengine.File, which reads the owner's temp,
// or the file while nothing is uncommitted, and performs what the write
// protocol decides. A write open makes one; so does a read-only open by
// the owner while it has uncommitted bytes (so that a process that
// reopens a file it is writing reads its own bytes): the protocol counts
// that one as a reader, which never commits.
type writeHandle struct {
	handle
	file *writeengine.File[*Node]
}

var (
	_ = (fs.FileReader)((*writeHandle)(nil))
	_ = (fs.FileWriter)((*writeHandle)(nil))
	_ = (fs.FileFlusher)((*writeHandle)(nil))
	_ = (fs.FileFsyncer)((*writeHandle)(nil))
	_ = (fs.FileReleaser)((*writeHandle)(nil))
	_ = (fs.FileLseeker)((*writeHandle)(nil))
	_ = (openFile)((*writeHandle)(nil))
)

// Read serves the owner's temp, or the file while nothing is
// uncommitted.
func (h *writeHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, errno := h.file.Read(buf, off)
	return readhold.Bytes(buf[:n]), errno
}

// Write writes into the owner's temp, never the file (an append with
// nothing of the owner's uncommitted goes into the file in place), with
// O_APPEND as the kernel sent it with the write (fusefs/requestnotes).
func (h *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	flags, noted := h.node.fsys.writeIns.Of(ctx)
	n, errno := h.file.Write(ctx, caller(ctx).Pid, flags, noted, data, off)
	return uint32(n), errno
}

// Flush runs at every close(2) of a descriptor of the handle, dup2 over
// one included: the opener's last close commits (writeengine.File.Flush).
func (h *writeHandle) Flush(ctx context.Context) syscall.Errno {
	return h.file.Flush(ctx, caller(ctx).Pid)
}

// Fsync commits durably, whatever the mount's durability mode.
func (h *writeHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.file.Commit(ctx, true)
}

// Release ends the handle when its last descriptor is gone: its record
// locks are dropped, and the owner's last handle commits what is left
// uncommitted and gives up the write lock.
func (h *writeHandle) Release(ctx context.Context) syscall.Errno {
	if !h.release() {
		return syscall.EBADF
	}
	h.file.Release(ctx)
	h.node.opens.SharedGone()
	return 0
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the content the owner sees.
func (h *writeHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the fd holding the content the owner sees.
func (h *writeHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno {
	return h.file.WithCur(fn)
}
