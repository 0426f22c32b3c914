package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// POSIX record locks and flock on the mount (sqlite, git, make's jobserver
// rely on them) are open-file-description locks that the daemon takes on
// behalf of each locker: the kernel's lock_owner of a request (a process's
// file table for fcntl locks, an open file for flock), not the write-lock
// owner of owner.go. One fd per locker gives each its own lock identity, as
// the kernel gives each process: a locker's locks merge and split among
// themselves and conflict with every other locker's.
//
// All of a node's locker fds are opened from one anchor, the file as it was
// when the first lock was taken, and the anchor is kept while any locker
// holds an fd. Atomic writes replace the backing file, but lockers keep meeting on
// the anchor, so a commit never drops or splits a lock. (Locks taken by
// processes outside the mount on a later version of the file do not meet
// the mount's.) A node retired while readers hold it (views.go) hands its
// set to the node that replaces it: the two are one file to every locker.
//
// Each locker's fd is charged to the owner of the request that opened it,
// and the anchor to the owner whose lock made it (fdcap.go); closed, they
// are released.
type lockFds struct {
	mu          lockorder.Mutex[lockorder.LockFdsMu]
	anchor      int // 0 when none (fd 0 is never an anchor: dups start at 3)
	anchorOwner locks.Owner
	byLocker    map[uint64]int
	owners      map[uint64]locks.Owner // whom each locker's fd is charged to
	nodes       int                    // nodes sharing the set; guarded by FS.rekeyedMu
}

// fdCharge is n descriptors charged to owner o, to release.
type fdCharge struct {
	o locks.Owner
	n int
}

// lockSet returns n's lock set, made at first use: a node that go-fuse
// drops for one it knows already (a lookup of a known name) never holds
// one, so every set is dropped by the OnForget of each node sharing it.
func (n *Node) lockSet() *lockFds {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.recLocks == nil {
		n.recLocks = n.fsys.lockSetOf(n.bornAs)
	}
	return n.recLocks
}

// dropLocker closes locker's fd in n's lock set, if n has one.
func (n *Node) dropLocker(locker uint64) {
	n.mu.Lock()
	l := n.recLocks
	n.mu.Unlock()
	if l != nil {
		n.fsys.releaseAll(l.drop(locker))
	}
}

// has returns locker's lock fd if it has one.
func (l *lockFds) has(locker uint64) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd, ok := l.byLocker[locker]
	return fd, ok
}

// fd returns locker's lock fd, opening it from the anchor (made from src, an
// fd of the file's current content, on first use); opened is how many fds
// it opened, charged to owner.
func (l *lockFds) fd(src int, locker uint64, owner locks.Owner) (fd, opened int, errno syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd, ok := l.byLocker[locker]; ok {
		return fd, 0, 0
	}
	if len(l.byLocker) == 0 {
		anchor, err := dirfd.Dup(src)
		if err != nil {
			return -1, 0, toErrno(err)
		}
		l.anchor, l.anchorOwner = anchor, owner
	}
	fd, err := dirfd.Reopen(l.anchor, unix.O_RDWR)
	if err != nil {
		fd, err = dirfd.Reopen(l.anchor, unix.O_RDONLY)
	}
	if err != nil {
		if len(l.byLocker) == 0 {
			dirfd.Close(l.anchor)
			l.anchor, l.anchorOwner = 0, ""
		}
		return -1, 0, toErrno(err)
	}
	if l.byLocker == nil {
		l.byLocker = make(map[uint64]int)
		l.owners = make(map[uint64]locks.Owner)
	}
	l.byLocker[locker] = fd
	l.owners[locker] = owner
	if len(l.byLocker) == 1 {
		return fd, 2, 0
	}
	return fd, 1, 0
}

// drop closes locker's fd, which releases every lock it held, and returns
// the charges of the fds it closed.
func (l *lockFds) drop(locker uint64) []fdCharge {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd, ok := l.byLocker[locker]
	if !ok {
		return nil
	}
	dirfd.Close(fd)
	cs := []fdCharge{{l.owners[locker], 1}}
	delete(l.byLocker, locker)
	delete(l.owners, locker)
	if len(l.byLocker) == 0 {
		dirfd.Close(l.anchor)
		cs = append(cs, fdCharge{l.anchorOwner, 1})
		l.anchor, l.anchorOwner = 0, ""
	}
	return cs
}

// closeAll closes every locker's fd and the anchor: the node is forgotten.
// It returns the charges of the fds it closed.
func (l *lockFds) closeAll() []fdCharge {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []fdCharge
	for locker, fd := range l.byLocker {
		dirfd.Close(fd)
		cs = append(cs, fdCharge{l.owners[locker], 1})
		delete(l.byLocker, locker)
		delete(l.owners, locker)
	}
	if l.anchor > 0 {
		dirfd.Close(l.anchor)
		cs = append(cs, fdCharge{l.anchorOwner, 1})
		l.anchor, l.anchorOwner = 0, ""
	}
	return cs
}

// lockFd returns the lock fd of locker for handle fh, remembering on the
// handle that locker used it. A locker's first lock on the file charges
// the caller's owner its fd and maybe the anchor (fdcap.go): an owner that
// may not take two more is refused, ENOLCK (flock's and fcntl's "no
// room for lock records"), audited RESOURCE_LIMIT.
func (n *Node) lockFd(ctx context.Context, fh fs.FileHandle, locker uint64) (int, syscall.Errno) {
	h := fileOf(fh)
	if h == nil {
		return -1, syscall.EBADF
	}
	l := n.lockSet()
	if fd, ok := l.has(locker); ok {
		h.common().noteLocker(locker)
		return fd, 0
	}
	f := n.fsys
	var owner locks.Owner
	if f.fds.bounded() {
		owner = f.owner(ctx)
		if errno := f.chargeOrRefuse(ctx, owner, "lock", n, "", 2, 2, syscall.ENOLCK); errno != 0 {
			return -1, errno
		}
	}
	var fd, opened int
	errno := h.withFd(func(src int) syscall.Errno {
		var errno syscall.Errno
		fd, opened, errno = l.fd(src, locker, owner)
		return errno
	})
	if owner != "" {
		f.fds.release(owner, 2-opened)
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
	flk.Pid = 0
	if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &flk); err != nil {
		return toErrno(err)
	}
	out.FromFlockT(&flk)
	return 0
}

// Setlk takes or releases a POSIX record lock or flock without waiting,
// as an OFD lock on the locker's fd (see lockFds).
func (n *Node) Setlk(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, locker, lk, flags, false)
}

// Setlkw waits for the lock by retrying: a blocking fcntl could not be
// interrupted when the caller gives up (a signal, or the kernel's INTERRUPT).
func (n *Node) Setlkw(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setLock(ctx, fh, locker, lk, flags, true)
}

// setLock is Setlk and Setlkw: an OFD lock or flock on locker's fd,
// retried with backoff until ctx ends when wait is set.
func (n *Node) setLock(ctx context.Context, fh fs.FileHandle, locker uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	fd, errno := n.lockFd(ctx, fh, locker)
	if errno != 0 {
		return errno
	}
	try := func() error {
		if flags&fuse.FUSE_LK_FLOCK != 0 {
			op := unix.LOCK_NB
			switch lk.Typ {
			case syscall.F_RDLCK:
				op |= unix.LOCK_SH
			case syscall.F_WRLCK:
				op |= unix.LOCK_EX
			case syscall.F_UNLCK:
				op |= unix.LOCK_UN
			default:
				return syscall.EINVAL
			}
			return unix.Flock(fd, op)
		}
		var flk syscall.Flock_t
		lk.ToFlockT(&flk)
		flk.Pid = 0 // OFD locks require it
		return syscall.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &flk)
	}
	delay := time.Millisecond
	for {
		err := try()
		if err == nil {
			return 0
		}
		if !wait || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EACCES) {
			return toErrno(err)
		}
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}
