package writeengine

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Coordinated files. A program that shares a file between its processes
// through record locks and a shared mapping orders its own writers: SQLite
// reads and writes its database, -wal and -journal in place and maps its
// -shm into every connection, whichever owner each connection belongs to.
// The mount's atomic writes would break it: each owner would write a temp
// of its own, see a size of its own for the one kernel inode (fusefs
// views.go), and the kernel would cut the other owner's mapping short
// (SIGBUS), while the lock table would refuse the second owner's write
// open outright.
//
// So a file at a path of the policy's coordinated set (SQLite's files by
// default) is served as the host's filesystem serves it: every open, of
// any owner, gets an in-place handle on the file itself (InPlace; fusefs
// inPlaceHandle, made by Node.openInPlace), read and written in place
// through one cache all of them share, so that mappings stay coherent and
// every owner sees the one size: the backing file's own, where the mount
// passes through (the kernel reads, writes and maps it without the
// daemon), else the kernel's page cache of the node. The lock table takes
// no write lock on it; the record locks every owner takes meet on the one
// node (fusefs reclock.go), and F_GETLK reports any owner's lock. Every
// other check is the same as for any open: the name resolved with
// O_NOFOLLOW and verified, credentials and protect judged, the open
// audited when refused.
//
// What would mean more on the host than on the mount is kept out: a file
// is written in place only while it is a regular file with no set-ID bit
// (the daemon writes as root, which keeps the bit, where new content must
// not: guard/hostmode.go; a file capability goes with any write, root's
// too), and while no owner holds the lock table's write lock on it (a
// file renamed to a coordinated name while written). Otherwise the open
// takes the ordinary route, which drops the bit. A file with several
// links is written in place as the ordinary route's commit writes one
// (Write.commitInPlace): every name keeps meaning the one file.
//
// A crash leaves what the program wrote, and what it fsynced is durable,
// in every durability mode: as on the host, the program's own journal
// (SQLite's WAL or rollback journal) makes that consistent.

// InPlace is an open of a coordinated file: its own fd of the verified
// file, read-write for a write open, whose writes go into the file.
type InPlace struct {
	fd    int
	write bool // fd is O_RDWR
	// own, for a file the mount made at a credential path, runs each
	// change through Host.OwnMadeChange, which restamps the file so that
	// it stays readable; nil for any other.
	own func(fds []int, change func() error) error
	// take takes a write's bytes from the room the file system leaves a
	// writer that is not root (Engine.take).
	take func(ctx context.Context, n int64) syscall.Errno
}

// OpenInPlace is the in-place open of a coordinated file at workspace
// path rel through fd (O_RDWR if write; the caller closes it); made: the
// file is one the mount made at a credential path.
func (g *Engine[N]) OpenInPlace(fd int, write, made bool, rel string) *InPlace {
	p := &InPlace{fd: fd, write: write, take: func(ctx context.Context, n int64) syscall.Errno {
		return g.take(ctx, n, func() string { return rel })
	}}
	if made {
		p.own = g.host.OwnMadeChange
	}
	return p
}

// Fd is the open's descriptor of the file.
func (p *InPlace) Fd() int { return p.fd }

// change runs a change of the file that may need room bytes more,
// restamping the file if the mount made it. A read-only open changes
// nothing (EBADF) and takes no room.
func (p *InPlace) change(ctx context.Context, room int64, fn func() error) syscall.Errno {
	if !p.write {
		return syscall.EBADF
	}
	if errno := p.take(ctx, room); errno != 0 {
		return errno
	}
	if p.own == nil {
		return dirfd.Errno(fn())
	}
	return dirfd.Errno(p.own([]int{p.fd}, fn))
}

// Write writes data into the file in place, at the offset the kernel
// gives (an O_APPEND write's is the size of the one inode every owner
// shares).
func (p *InPlace) Write(ctx context.Context, data []byte, off int64) (int, syscall.Errno) {
	var n int
	errno := p.change(ctx, int64(len(data)), func() (err error) {
		n, err = unix.Pwrite(p.fd, data, off)
		return err
	})
	return max(n, 0), errno
}

// Truncate sets the file's size.
func (p *InPlace) Truncate(size uint64) syscall.Errno {
	return p.change(context.Background(), 0, func() error { return unix.Ftruncate(p.fd, int64(size)) })
}

// Allocate preallocates or punches a hole in the file.
func (p *InPlace) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return p.change(ctx, allocates(mode, size), func() error { return unix.Fallocate(p.fd, mode, int64(off), int64(size)) })
}

// CopyIn copies size bytes of src at offIn into the file at offOut
// (copy_file_range(2)).
func (p *InPlace) CopyIn(ctx context.Context, src int, offIn, offOut, size, flags uint64) (int, syscall.Errno) {
	var copied int
	errno := p.change(ctx, int64(size), func() (err error) {
		ri, ro := int64(offIn), int64(offOut)
		copied, err = unix.CopyFileRange(src, &ri, p.fd, &ro, int(size), int(flags))
		return err
	})
	return max(copied, 0), errno
}

// Fsync syncs the file: its data only for fdatasync(2) (dataOnly).
func (p *InPlace) Fsync(dataOnly bool) syscall.Errno {
	if dataOnly {
		return dirfd.Errno(dirfd.Fdatasync(p.fd))
	}
	return dirfd.Errno(dirfd.Fsync(p.fd))
}
