package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Coordinated files. A program that shares a file between its processes
// through record locks and a shared mapping orders its own writers: SQLite
// reads and writes its database, -wal and -journal in place and maps its
// -shm into every connection, whichever owner each connection belongs to.
// The mount's atomic writes would break it: each owner would write a temp
// of its own, see a size of its own for the one kernel inode (views.go),
// and the kernel would cut the other owner's mapping short (SIGBUS), while
// the lock table would refuse the second owner's write open outright.
//
// So a file at a path of the policy's coordinated set (SQLite's files by
// default) is served as the host's filesystem serves it: every open, of
// any owner, gets an inPlaceHandle on the file itself, read and written in
// place through one cache all of them share, so that mappings stay
// coherent and every owner sees the one size: the backing file's own,
// where the mount passes through (the kernel reads, writes and maps it
// without the daemon), else the kernel's page cache of the node. The lock table
// takes no write lock on it; the record locks every owner takes meet on
// the one node (reclock.go), and F_GETLK reports any owner's lock. Every
// other check is the same as for any open: the name resolved with
// O_NOFOLLOW and verified, credentials and protect judged, the open
// audited when refused.
//
// What would mean more on the host than on the mount is kept out: a file
// is written in place only while it is a regular file with no set-ID bit
// (the daemon writes as root, which keeps the bit, where new content must
// not: hostmode.go; a file capability goes with any write, root's too),
// and while no owner holds the lock table's write lock on it (a file
// renamed to a coordinated name while written). Otherwise the open takes
// the ordinary route, which drops the bit. A file with several links is
// written in place as the ordinary route's commit writes one
// (commitInPlace): every name keeps meaning the one file.
//
// A crash leaves what the program wrote, and what it fsynced is durable,
// in every durability mode: as on the host, the program's own journal
// (SQLite's WAL or rollback journal) makes that consistent.

// inPlaceHandle is an open of a coordinated file: its own fd of the
// verified file, read-write for a write open.
type inPlaceHandle struct {
	handle
	fd    int
	write bool // fd is O_RDWR
	// made: the file is one the mount made at a credential path; each
	// change restamps it (guard.Guard.OwnChange), so that it stays readable.
	made bool
	// counted: the handle is counted on its node (Node.opens); a handle
	// made for the daemon's own use (truncate by name) is not.
	// passthrough: the kernel serves it from fd (passthroughInPlace).
	counted, passthrough bool
	reads                readHolds // reads go-fuse has yet to make from fd
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
func (p *passthroughInPlace) PassthroughFd() (int, bool) { return p.fd, true }

// change runs a change of the file, restamping it if the mount made it.
func (h *inPlaceHandle) change(fn func() error) error {
	if !h.made {
		return fn()
	}
	return h.node.fsys.guard.OwnChange([]int{h.fd}, fn)
}

// Read reads the file (readhold.go).
func (h *inPlaceHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.reads.read(h.fd, buf, off)
}

// Write writes the file in place, at the offset the kernel gives (an
// O_APPEND write's is the size of the one inode every owner shares).
func (h *inPlaceHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.write {
		return 0, syscall.EBADF
	}
	var n int
	err := h.change(func() (err error) {
		n, err = unix.Pwrite(h.fd, data, off)
		return err
	})
	return uint32(max(n, 0)), toErrno(err)
}

// truncate sets the file's size.
func (h *inPlaceHandle) truncate(size uint64) syscall.Errno {
	if !h.write {
		return syscall.EBADF
	}
	return toErrno(h.change(func() error { return unix.Ftruncate(h.fd, int64(size)) }))
}

// allocate preallocates or punches a hole in the file.
func (h *inPlaceHandle) allocate(off, size uint64, mode uint32) syscall.Errno {
	if !h.write {
		return syscall.EBADF
	}
	return toErrno(h.change(func() error { return unix.Fallocate(h.fd, mode, int64(off), int64(size)) }))
}

// copyIn copies size bytes of src at offIn into the file at offOut.
func (h *inPlaceHandle) copyIn(src int, offIn, offOut, size, flags uint64) (uint32, syscall.Errno) {
	if !h.write {
		return 0, syscall.EBADF
	}
	var copied int
	err := h.change(func() (err error) {
		ri, ro := int64(offIn), int64(offOut)
		copied, err = unix.CopyFileRange(src, &ri, h.fd, &ro, int(size), int(flags))
		return err
	})
	return uint32(max(copied, 0)), toErrno(err)
}

// Flush has nothing to do (the kernel is asked not to send it).
func (h *inPlaceHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// fsyncDataOnly is FUSE_FSYNC_FDATASYNC, the FSYNC flag of fdatasync(2)
// (include/uapi/linux/fuse.h), which go-fuse does not name.
const fsyncDataOnly = 1 << 0

// Fsync syncs the file: its data only for fdatasync(2).
func (h *inPlaceHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if flags&fsyncDataOnly != 0 {
		return toErrno(unix.Fdatasync(h.fd))
	}
	return toErrno(unix.Fsync(h.fd))
}

// Release ends the handle when its last descriptor is gone (and its last
// mapping): its record locks are dropped and its fd closes once go-fuse
// has done with every read of it.
func (h *inPlaceHandle) Release(ctx context.Context) syscall.Errno {
	if !h.release(nil) {
		return syscall.EBADF
	}
	if h.counted {
		h.node.opens.InPlaceGone(h.passthrough)
	}
	return toErrno(h.reads.close(h.fd))
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the file.
func (h *inPlaceHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the handle's fd.
func (h *inPlaceHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno { return fn(h.fd) }

// answersFor is always true: a coordinated file has one view.
func (h *inPlaceHandle) answersFor(ctx context.Context) bool { return true }
