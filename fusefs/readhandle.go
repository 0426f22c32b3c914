package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/nodeopens"
	"github.com/realm-dev/realm/fusefs/readhold"
	"github.com/realm-dev/realm/locks"
)

// readHandle is a plain read handle: it reads the verified backing file
// through its own fd, the file as it was at open (a commit since replaces
// the file, not what the handle reads, as a descriptor of a file replaced
// by rename does natively). Node.newReader makes it; it never writes and
// has nothing to commit.
type readHandle struct {
	handle
	fd    int            // of the verified backing file
	key   locks.Key      // that file's identity
	owner locks.Owner    // the opener's lock owner
	mode  nodeopens.Mode // how the kernel serves its reads (passthrough: straight from fd)
	reads readhold.Holds // reads go-fuse has yet to make from fd
}

var (
	_ = (fs.FileReader)((*readHandle)(nil))
	_ = (fs.FileWriter)((*readHandle)(nil))
	_ = (fs.FileFlusher)((*readHandle)(nil))
	_ = (fs.FileFsyncer)((*readHandle)(nil))
	_ = (fs.FileReleaser)((*readHandle)(nil))
	_ = (fs.FileLseeker)((*readHandle)(nil))
	_ = (openFile)((*readHandle)(nil))

	_ = (fs.FilePassthroughFder)((*passthroughFile)(nil))
)

// passthroughFile is a plain read handle that the kernel serves straight
// from the backing file. It is the only handle type that implements
// fs.FilePassthroughFder: once one is registered, go-fuse gives every later
// open of the node that same backing file (the kernel takes one per inode),
// and a write handle given one would write into the file in place, past the
// temp. nodeopens.Set.AdmitReader and Node.retire keep each node to one
// backing file.
type passthroughFile struct{ *readHandle }

// PassthroughFd lets go-fuse register the handle's fd with the kernel.
func (p *passthroughFile) PassthroughFd() (int, bool) { return p.fd, true }

// Read splices from the verified backing fd: the data does not pass
// through the daemon (fusefs/readhold).
func (h *readHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.reads.Read(h.fd, buf, off)
}

// Write answers EBADF, as write(2) on a descriptor opened read-only
// does: a read handle is read-only.
func (h *readHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EBADF
}

// Flush has nothing to do: a reader commits nothing (newReader asks the
// kernel not to send it, FOPEN_NOFLUSH).
func (h *readHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Fsync syncs the file the handle reads.
func (h *readHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return dirfd.Errno(dirfd.Fsync(h.fd))
}

// Release ends the handle when its last descriptor is gone: its record
// locks are dropped, it leaves the node's count of readers
// (nodeopens.Set.ReaderGone), and its fd closes once go-fuse has done with
// every read of it.
func (h *readHandle) Release(ctx context.Context) syscall.Errno {
	if !h.release() {
		return syscall.EBADF
	}
	h.node.opens.ReaderGone(h.mode)
	return dirfd.Errno(h.reads.Close(h.fd))
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the file the handle reads.
func (h *readHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the handle's own fd.
func (h *readHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno { return fn(h.fd) }
