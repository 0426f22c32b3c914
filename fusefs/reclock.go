package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/reclock"
	"github.com/realm-dev/realm/locks"
)

// POSIX record locks and flock on the mount are OFD locks on one fd per
// locker (the kernel's lock_owner of a request), all opened from one
// anchor per file so that a commit never drops or splits a lock: package
// reclock keeps them, with each node's lock set (Node.recLocks) and the
// sets retired nodes hand on (FS.heirs). Here are the adapters: the
// locker's fd, charged to the caller's owner (fusefs/admit: fds.go), and
// Getlk, Setlk and Setlkw.

// lockFd returns the lock fd of locker for handle fh, remembering on the
// handle that locker used it. A locker's first lock on the file charges
// the caller's owner its fd and maybe the anchor (fusefs/admit: fds.go): an
// owner that may not take two more is refused, ENOLCK (flock's and fcntl's "no
// room for lock records"), audited RESOURCE_LIMIT.
func (n *Node) lockFd(ctx context.Context, fh fs.FileHandle, locker uint64) (int, syscall.Errno) {
	h := fileOf(fh)
	if h == nil {
		return -1, syscall.EBADF
	}
	f := n.fsys
	fd, errno := f.heirs.Fd(&n.recLocks, locker, h.withFd, func() (locks.Owner, syscall.Errno) {
		if !f.fds.Bounded() {
			return "", 0
		}
		owner := f.owner(ctx)
		return owner, f.gate.ChargeOrRefuse(ctx, owner, "lock", n, "", reclock.LockerFds, reclock.LockerFds, syscall.ENOLCK)
	})
	if errno != 0 {
		return -1, errno
	}
	h.common().noteLocker(locker)
	return fd, 0
}

// Getlk reports a lock that would conflict with lk.
func (n *Node) Getlk(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	fd, errno := n.lockFd(ctx, fh, locker)
	if errno != 0 {
		return errno
	}
	return reclock.Getlk(fd, lk, out)
}

// Setlk takes or releases a POSIX record lock or flock without waiting,
// as an OFD lock on the locker's fd (package reclock).
func (n *Node) Setlk(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	fd, errno := n.lockFd(ctx, fh, locker)
	if errno != 0 {
		return errno
	}
	return reclock.Setlk(ctx, fd, lk, flags, false)
}

// Setlkw waits for the lock by retrying: a blocking fcntl could not be
// interrupted when the caller gives up (a signal, or the kernel's INTERRUPT).
func (n *Node) Setlkw(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	fd, errno := n.lockFd(ctx, fh, locker)
	if errno != 0 {
		return errno
	}
	return reclock.Setlk(ctx, fd, lk, flags, true)
}
