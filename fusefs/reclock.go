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
// reclock keeps them. Here are the adapters: the node's lock set, made at
// first use and handed on when the node is retired (reclock.Heirs), the
// charges of the fds it opens (fusefs/admit: fds.go), and Getlk, Setlk and
// Setlkw.

// lockSet returns n's lock set, made at first use: a node that go-fuse
// drops for one it knows already (a lookup of a known name) never holds
// one, so every set is dropped by the OnForget of each node sharing it.
func (n *Node) lockSet() *reclock.Set {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.recLocks == nil {
		n.recLocks = n.fsys.heirs.Of(n.bornAs)
	}
	return n.recLocks
}

// dropLocker closes locker's fd in n's lock set, if n has one.
func (n *Node) dropLocker(locker uint64) {
	n.mu.Lock()
	l := n.recLocks
	n.mu.Unlock()
	if l != nil {
		n.fsys.releaseAll(l.Drop(locker))
	}
}

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
	l := n.lockSet()
	if fd, ok := l.Has(locker); ok {
		h.common().noteLocker(locker)
		return fd, 0
	}
	f := n.fsys
	var owner locks.Owner
	if f.fds.Bounded() {
		owner = f.owner(ctx)
		if errno := f.gate.ChargeOrRefuse(ctx, owner, "lock", n, "", 2, 2, syscall.ENOLCK); errno != 0 {
			return -1, errno
		}
	}
	var fd, opened int
	errno := h.withFd(func(src int) syscall.Errno {
		var errno syscall.Errno
		fd, opened, errno = l.Fd(src, locker, owner)
		return errno
	})
	if owner != "" {
		f.fds.Release(owner, 2-opened)
	}
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
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	if errno := reclock.Test(fd, &flk); errno != 0 {
		return errno
	}
	out.FromFlockT(&flk)
	return 0
}

// Setlk takes or releases a POSIX record lock or flock without waiting,
// as an OFD lock on the locker's fd (package reclock).
func (n *Node) Setlk(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, locker, lk, flags, false)
}

// Setlkw waits for the lock by retrying: a blocking fcntl could not be
// interrupted when the caller gives up (a signal, or the kernel's INTERRUPT).
func (n *Node) Setlkw(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, locker, lk, flags, true)
}

// setLock is Setlk and Setlkw: a flock or an OFD lock on locker's fd,
// retried with backoff until ctx ends when wait is set.
func (n *Node) setLock(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	fd, errno := n.lockFd(ctx, fh, locker)
	if errno != 0 {
		return errno
	}
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return reclock.Flock(ctx, fd, lk.Typ, wait)
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	return reclock.Lock(ctx, fd, flk, wait)
}
