// Package reclock keeps the descriptors behind POSIX record locks and
// flock on the mount: one open-file-description lock fd per locker, opened
// from one anchor per file, each node's lock set (its Place) and the sets
// a retired node hands to the nodes that replace it (Heirs), and answers
// the kernel's GETLK, SETLK and SETLKW on them. It is a package of its own
// because none of it needs the node tree: fusefs's Getlk, Setlk and Setlkw
// find the locker's fd (Heirs.Fd) and call Getlk or Setlk here.
package reclock

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// POSIX record locks and flock on the mount (sqlite, git, make's jobserver
// rely on them) are open-file-description locks that the daemon takes on
// behalf of each locker: the kernel's lock_owner of a request (a process's
// file table for fcntl locks, an open file for flock), not the write-lock
// owner of the lock table. One fd per locker gives each its own lock
// identity, as the kernel gives each process: a locker's locks merge and
// split among themselves and conflict with every other locker's.
//
// All of a node's locker fds are opened from one anchor, the file as it was
// when the first lock was taken, and the anchor is kept while any locker
// holds an fd. Atomic writes replace the backing file, but lockers keep
// meeting on the anchor, so a commit never drops or splits a lock. (Locks
// taken by processes outside the mount on a later version of the file do
// not meet the mount's.) A node retired while readers hold it hands its
// set to the node that replaces it (Heirs): the two are one file to every
// locker.
//
// Each locker's fd is charged to the owner of the request that opened it,
// and the anchor to the owner whose lock made it (fusefs/admit: fds.go);
// closed, they are released (Heirs.Charges): the charges a set's calls
// return say to whom.
type Set struct {
	mu          lockorder.Mutex[lockorder.LockFdsMu]
	anchor      int // 0 when none (fd 0 is never an anchor: dups start at 3)
	anchorOwner locks.Owner
	byLocker    map[uint64]int
	owners      map[uint64]locks.Owner // whom each locker's fd is charged to
	nodes       int                    // nodes sharing the set; guarded by Heirs.mu
}

// charged is n descriptors charged to owner, to release.
type charged struct {
	owner locks.Owner
	n     int
}

// has returns locker's lock fd if it has one.
func (l *Set) has(locker uint64) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd, ok := l.byLocker[locker]
	return fd, ok
}

// fd returns locker's lock fd, opening it from the anchor (made from src, an
// fd of the file's current content, on first use); opened is how many fds
// it opened, charged to owner.
func (l *Set) fd(src int, locker uint64, owner locks.Owner) (fd, opened int, errno syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd, ok := l.byLocker[locker]; ok {
		return fd, 0, 0
	}
	if len(l.byLocker) == 0 {
		anchor, err := dirfd.Dup(src)
		if err != nil {
			return -1, 0, dirfd.Errno(err)
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
		return -1, 0, dirfd.Errno(err)
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
func (l *Set) drop(locker uint64) []charged {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd, ok := l.byLocker[locker]
	if !ok {
		return nil
	}
	dirfd.Close(fd)
	cs := []charged{{l.owners[locker], 1}}
	delete(l.byLocker, locker)
	delete(l.owners, locker)
	if len(l.byLocker) == 0 {
		dirfd.Close(l.anchor)
		cs = append(cs, charged{l.anchorOwner, 1})
		l.anchor, l.anchorOwner = 0, ""
	}
	return cs
}

// closeAll closes every locker's fd and the anchor: the last node sharing
// the set is forgotten. It returns the charges of the fds it closed.
func (l *Set) closeAll() []charged {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []charged
	for locker, fd := range l.byLocker {
		dirfd.Close(fd)
		cs = append(cs, charged{l.owners[locker], 1})
		delete(l.byLocker, locker)
		delete(l.owners, locker)
	}
	if l.anchor > 0 {
		dirfd.Close(l.anchor)
		cs = append(cs, charged{l.anchorOwner, 1})
		l.anchor, l.anchorOwner = 0, ""
	}
	return cs
}
