// Package dircache bounds the directory fds a FUSE daemon keeps open:
// each directory in use holds an O_PATH fd, pinned while a request uses
// it; an unpinned one is idle, and beyond a bound the least recently used
// idle fds are closed, keeping each directory's file handle to reopen it
// by. It is a package of its own because it needs of the node tree only a
// place in each directory node (Entry) and three questions of it, asked
// by Use: its identity, its fd opened by name, and whether an fd that
// followed the directory is still beneath the root. fusefs opens and
// verifies by name (node_dir.go); this package keeps the fds, reopens
// them by handle, and pins each for a use.
package dircache

import (
	"container/list"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Entry is a directory's place in the cache, held by its node. The zero
// value has no fd open. Its fields are guarded by the Cache's mu.
type Entry struct {
	fd        int // valid while open
	open      bool
	pins      int
	idle      *list.Element // of *Entry, while open, unpinned and not forgotten
	handle    *unix.FileHandle
	forgotten bool
	installed bool // an fd was installed once
}

// Cache keeps the directory fds of a mount. mu is a leaf: it guards each
// Entry's fd, pins, place in the idle list, handle and forgotten mark; no
// system call is made under it. Set its bound (SetBound) and open its
// mount fd (OpenMountFd) before use.
type Cache struct {
	mu    lockorder.Mutex[lockorder.DirCacheMu]
	bound int
	idle  list.List // of *Entry, the most recently used first
	// noHandles: open_by_handle_at is refused (EPERM), or mountFd could
	// not be opened: directories reopen by name only.
	noHandles atomic.Bool
	// mountFd is the root opened for reading: open_by_handle_at takes no
	// O_PATH fd for the mount (EBADF).
	mountFd int
}

// noUnpin is the unpin of a use that pinned nothing.
func noUnpin() {}

// Use pins e's fd for a use and returns it with its unpin, which the
// caller calls when done (on error it does nothing). An entry with no fd
// open has it reopened: by the handle kept when its fd was closed, if that
// still opens the directory ident names, else by open (the caller's: by
// name, verified). An fd kept open or reopened by its handle has followed
// its directory wherever the host moved it, so check (the caller's: is it
// still beneath the root?) must pass first. first: e's fd is open for the
// first time.
func (c *Cache) Use(e *Entry, ident func() (dev, ino uint64), open func() (int, syscall.Errno), check func(fd int) syscall.Errno) (fd int, unpin func(), first bool, errno syscall.Errno) {
	if fd := c.Pin(e); fd >= 0 {
		if errno := check(fd); errno != 0 {
			c.Unpin(e)
			return -1, noUnpin, false, errno
		}
		return fd, func() { c.Unpin(e) }, false, 0
	}
	fd, byHandle, errno := c.reopen(e, ident, open)
	if errno != 0 {
		return -1, noUnpin, false, errno
	}
	fd, first = c.install(e, fd)
	unpin = func() { c.Unpin(e) }
	if byHandle {
		if errno := check(fd); errno != 0 {
			unpin()
			return -1, noUnpin, false, errno
		}
	}
	return fd, unpin, first, 0
}

// reopen opens e's directory: by the handle kept when its fd was closed,
// if that still opens the directory ident names, else by open.
func (c *Cache) reopen(e *Entry, ident func() (dev, ino uint64), open func() (int, syscall.Errno)) (fd int, byHandle bool, errno syscall.Errno) {
	if fd, ok := c.openByHandle(e); ok {
		var st unix.Stat_t
		if dev, ino := ident(); dirfd.Fstat(fd, &st) == nil && st.Dev == dev && st.Ino == ino {
			return fd, true, 0
		}
		dirfd.Close(fd)
	}
	fd, errno = open()
	return fd, false, errno
}

// SetBound sets how many idle fds are kept at most.
func (c *Cache) SetBound(n int) { c.bound = n }

// ByNameOnly has directories whose fd was closed reopened by name only,
// never by their handle (tests; the cache falls back to it by itself).
func (c *Cache) ByNameOnly() { c.noHandles.Store(true) }

// OpenMountFd opens the mount fd handles are opened through from the
// root's O_PATH fd root; failing, directories reopen by name only.
func (c *Cache) OpenMountFd(root int) {
	fd, err := dirfd.ReopenDir(root)
	if err != nil {
		c.mountFd = -1
		c.noHandles.Store(true)
		return
	}
	c.mountFd = fd
}

// CloseMountFd closes the mount fd.
func (c *Cache) CloseMountFd() {
	if c.mountFd >= 0 {
		dirfd.Close(c.mountFd)
	}
}

// Pin returns e's fd, pinned, or -1 if it has none open.
func (c *Cache) Pin(e *Entry) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.open {
		return -1
	}
	c.pinLocked(e)
	return e.fd
}

func (c *Cache) pinLocked(e *Entry) {
	e.pins++
	if e.idle != nil {
		c.idle.Remove(e.idle)
		e.idle = nil
	}
}

// install makes fd, just opened and verified, e's fd, pinned; if another
// request installed one meanwhile, fd is closed and that one pinned.
// first: e's fd is open for the first time.
func (c *Cache) install(e *Entry, fd int) (_ int, first bool) {
	c.mu.Lock()
	if e.open {
		c.pinLocked(e)
		have := e.fd
		c.mu.Unlock()
		dirfd.Close(fd)
		return have, false
	}
	e.fd, e.open = fd, true
	e.pins++
	first = !e.installed
	e.installed = true
	c.mu.Unlock()
	return fd, first
}

// evicted is an idle fd closed for the bound, and its entry.
type evicted struct {
	e  *Entry
	fd int
}

// Unpin ends a use of e's fd: the last makes it idle, and the idle fds
// beyond the bound are closed (a forgotten entry's at once).
func (c *Cache) Unpin(e *Entry) {
	var gone []evicted
	c.mu.Lock()
	if e.pins--; e.pins == 0 && e.open {
		if e.forgotten {
			gone = append(gone, evicted{e, e.fd})
			e.open = false
		} else {
			e.idle = c.idle.PushFront(e)
		}
	}
	for c.idle.Len() > c.bound {
		el := c.idle.Back()
		m := el.Value.(*Entry)
		c.idle.Remove(el)
		m.idle = nil
		gone = append(gone, evicted{m, m.fd})
		m.open = false
	}
	c.mu.Unlock()
	c.closeIdle(gone)
}

// closeIdle closes the fds evicted, keeping each live entry's handle.
func (c *Cache) closeIdle(gone []evicted) {
	for _, ev := range gone {
		if !c.isForgotten(ev.e) && !c.noHandles.Load() {
			if h, err := dirfd.DirHandle(ev.fd); err == nil {
				c.mu.Lock()
				ev.e.handle = &h
				c.mu.Unlock()
			}
		}
		dirfd.Close(ev.fd)
	}
}

// isForgotten reports whether e was forgotten.
func (c *Cache) isForgotten(e *Entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.forgotten
}

// Forget marks e dropped (its directory node was) and takes its fd out
// of the cache: closed now, or by its last Unpin if a use pins it.
// unwatch, if not nil, is handed first a descriptor of the directory to
// remove its watch by: its fd if open, else, with needFd (a fanotify mark,
// which would pin the directory's inode), one opened by the handle kept,
// for the removal; else -1.
func (c *Cache) Forget(e *Entry, unwatch func(fd int), needFd bool) {
	fd, owned := c.forget(e)
	if unwatch != nil {
		markFd := fd
		if markFd < 0 && needFd {
			if hfd, ok := c.openByHandle(e); ok {
				markFd = hfd
				defer dirfd.Close(hfd)
			}
		}
		unwatch(markFd)
	}
	if owned && fd >= 0 {
		dirfd.Close(fd)
	}
}

// forget marks e dropped and takes its fd out of the cache: owned, the
// caller closes it; else it is pinned (or -1), and its last Unpin closes
// it.
func (c *Cache) forget(e *Entry) (fd int, owned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.forgotten = true
	if e.idle != nil {
		c.idle.Remove(e.idle)
		e.idle = nil
	}
	if !e.open {
		return -1, true
	}
	if e.pins == 0 {
		e.open = false
		return e.fd, true
	}
	return e.fd, false
}

// openByHandle opens e's directory by the handle kept when its fd was
// closed; ok false if there is none, or handles may not be opened. The fd
// is not verified: the caller checks it is e's directory.
func (c *Cache) openByHandle(e *Entry) (fd int, ok bool) {
	c.mu.Lock()
	h := e.handle
	c.mu.Unlock()
	if h == nil || c.noHandles.Load() {
		return -1, false
	}
	fd, err := dirfd.OpenDirByHandle(c.mountFd, *h)
	if err == syscall.EPERM {
		c.noHandles.Store(true)
	}
	return fd, err == nil
}

// Idle is how many idle fds are kept.
func (c *Cache) Idle() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle.Len()
}
