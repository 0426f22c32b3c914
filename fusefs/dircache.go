package fusefs

import (
	"container/list"
	"context"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Directory fds. Every directory node holds an O_PATH fd of its directory
// while it is in use (Node.dirFd), but not for as long as the kernel caches
// the node: a process that walks 100,000 directories (find, git status)
// leaves the kernel caching all of them, and one fd each would take every
// descriptor the daemon has. So a directory fd no request uses is idle, and
// the daemon keeps at most dirCache.bound idle ones (fdbudget.DirFdBound: an eighth
// of its descriptor limit, at most 4096), closing the least recently used
// beyond that. A node whose fd was closed opens it again at its next use:
// by the directory's file handle (kept at the close, open_by_handle_at,
// which needs CAP_DAC_READ_SEARCH) or else by name from its parent's fd as
// at first use; either way the fd is checked against the node's (dev, ino),
// and at every use against the root (stillInside), as before. A handle,
// like the fd it replaces, follows its directory wherever the host renames
// it; one moved out is ESTALE, PATH_ESCAPE, as with the fd kept open.
//
// A use pins the fd (dirFd returns the unpin): a pinned fd is never closed,
// so no request ever acts on a descriptor number closed (and reused)
// under it. The descriptors open are so the idle bound plus those pinned
// by requests in progress (the fdbudget reserve's inFlightFds).
//
// dirCache.mu is a leaf: it guards each directory node's fd, pins, place
// in the idle list, handle and forgotten mark; no system call is made
// under it.
type dirCache struct {
	mu    lockorder.Mutex[lockorder.DirCacheMu]
	bound int
	idle  list.List // of *Node, the most recently used first
	// noHandles: open_by_handle_at is refused (EPERM), or mountFd could
	// not be opened: nodes reopen by name only.
	noHandles atomic.Bool
	// mountFd is the root opened for reading: open_by_handle_at takes no
	// O_PATH fd for the mount (EBADF).
	mountFd int
}

// openMountFd opens the root's mountFd from its O_PATH fd root.
func (c *dirCache) openMountFd(root int) {
	fd, err := dirfd.ReopenDir(root)
	if err != nil {
		c.mountFd = -1
		c.noHandles.Store(true)
		return
	}
	c.mountFd = fd
}

// closeMountFd closes mountFd.
func (c *dirCache) closeMountFd() {
	if c.mountFd >= 0 {
		dirfd.Close(c.mountFd)
	}
}

// evicted is an idle fd closed for the bound, and its node.
type evicted struct {
	n  *Node
	fd int
}

// pin returns n's fd, pinned, or -1 if it has none open.
func (c *dirCache) pin(n *Node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.fd < 0 {
		return -1
	}
	n.pins++
	if n.idle != nil {
		c.idle.Remove(n.idle)
		n.idle = nil
	}
	return n.fd
}

// install makes fd, just opened and verified, n's fd, pinned; if another
// request installed one meanwhile, fd is closed and that one pinned.
// first: n's fd is open for the first time (the watcher adds it).
func (c *dirCache) install(n *Node, fd int) (_ int, first bool) {
	c.mu.Lock()
	if n.fd >= 0 {
		n.pins++
		if n.idle != nil {
			c.idle.Remove(n.idle)
			n.idle = nil
		}
		have := n.fd
		c.mu.Unlock()
		dirfd.Close(fd)
		return have, false
	}
	n.fd = fd
	n.pins++
	first = !n.watchTried
	n.watchTried = true
	c.mu.Unlock()
	return fd, first
}

// unpin ends a use of n's fd: the last makes it idle, and the idle fds
// beyond the bound are closed (a forgotten node's at once).
func (c *dirCache) unpin(n *Node) {
	var gone []evicted
	c.mu.Lock()
	if n.pins--; n.pins == 0 && n.fd >= 0 {
		if n.forgotten {
			gone = append(gone, evicted{n, n.fd})
			n.fd = -1
		} else {
			n.idle = c.idle.PushFront(n)
		}
	}
	for c.idle.Len() > c.bound {
		e := c.idle.Back()
		m := e.Value.(*Node)
		c.idle.Remove(e)
		m.idle = nil
		gone = append(gone, evicted{m, m.fd})
		m.fd = -1
	}
	c.mu.Unlock()
	c.closeIdle(gone)
}

// closeIdle closes the fds evicted, keeping each live node's handle.
func (c *dirCache) closeIdle(gone []evicted) {
	for _, e := range gone {
		if !e.n.isForgotten(c) && !c.noHandles.Load() {
			if h, err := dirfd.DirHandle(e.fd); err == nil {
				c.mu.Lock()
				e.n.handle = &h
				c.mu.Unlock()
			}
		}
		dirfd.Close(e.fd)
	}
}

// isForgotten reports whether go-fuse dropped n.
func (n *Node) isForgotten(c *dirCache) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.forgotten
}

// forget marks n dropped and takes its fd out of the cache: owned, the
// caller closes it; else it is pinned (or -1), and its last unpin closes it.
func (c *dirCache) forget(n *Node) (fd int, owned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n.forgotten = true
	if n.idle != nil {
		c.idle.Remove(n.idle)
		n.idle = nil
	}
	fd = n.fd
	if n.pins == 0 {
		n.fd = -1
		return fd, true
	}
	return fd, false
}

// handleOf is the file handle kept for n when its fd was closed, if any.
func (c *dirCache) handleOf(n *Node) *unix.FileHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.handle
}

// noUnpin is the unpin of a use that pinned nothing.
func noUnpin() {}

// dirFd returns the O_PATH fd of directory n, pinned until the caller
// calls done (always, also on error), opening and verifying it if it has
// none open (dircache.go).
//
// The fd follows its directory wherever the host renames it, so each use
// asks first whether the directory is still beneath the root (stillInside):
// one moved out of BACKING is gone for the mount (ESTALE), even to a
// process whose working directory it is.
func (n *Node) dirFd(ctx context.Context) (fd int, done func(), errno syscall.Errno) {
	f := n.fsys
	if n == f.root {
		return n.fd, noUnpin, 0
	}
	c := &f.dirs
	if fd := c.pin(n); fd >= 0 {
		if errno := n.stillInside(ctx, fd); errno != 0 {
			c.unpin(n)
			return -1, noUnpin, errno
		}
		return fd, func() { c.unpin(n) }, 0
	}
	fd, byHandle, errno := n.reopenDir(ctx)
	if errno != 0 {
		return -1, noUnpin, errno
	}
	fd, first := c.install(n, fd)
	done = func() { c.unpin(n) }
	if byHandle {
		if errno := n.stillInside(ctx, fd); errno != 0 {
			done()
			return -1, noUnpin, errno
		}
	}
	if w := f.watch; w != nil && first {
		w.add(n, fd)
	}
	return fd, done, 0
}

// reopenDir opens n's directory: by the handle kept when its fd was
// closed, if that still opens n's directory, else by name (openDirByName).
func (n *Node) reopenDir(ctx context.Context) (fd int, byHandle bool, errno syscall.Errno) {
	c := &n.fsys.dirs
	if h := c.handleOf(n); h != nil && !c.noHandles.Load() {
		fd, err := dirfd.OpenDirByHandle(c.mountFd, *h)
		if err == syscall.EPERM {
			c.noHandles.Store(true)
		}
		if err == nil {
			var st unix.Stat_t
			if dev, ino := n.ident(); dirfd.Fstat(fd, &st) == nil && st.Dev == dev && st.Ino == ino {
				return fd, true, 0
			}
			dirfd.Close(fd)
		}
	}
	fd, errno = n.openDirByName(ctx)
	return fd, false, errno
}

// openDirByName opens n's directory by its name in its parent's fd, and
// verifies it is the directory n was looked up as.
func (n *Node) openDirByName(ctx context.Context) (int, syscall.Errno) {
	lockorder.GoFuse("Inode.Parent")
	name, parent := n.Parent()
	pn := asNode(parent)
	if pn == nil {
		return -1, syscall.ENOENT // unlinked, or not attached yet
	}
	pfd, done, errno := pn.dirFd(ctx)
	defer done()
	if errno != 0 {
		return -1, errno
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if err != nil {
		if isEscape(err) || err == syscall.ENOTDIR {
			return -1, n.fsys.refuse(ctx, "opendir", pn, name, errcode.PathEscape, RuleEscapeResolve)
		}
		return -1, toErrno(err)
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		dirfd.Close(fd)
		return -1, toErrno(err)
	}
	if errno := n.verify(ctx, "opendir", pn, name, &st); errno != 0 {
		dirfd.Close(fd)
		return -1, errno
	}
	return fd, 0
}

// forgetDir closes n's directory fd (or has its last unpin close it) and
// removes its watch: go-fuse dropped n. A fanotify mark is removed through
// a descriptor of the directory (the mark would pin its inode): the fd if
// open, else one opened by its handle for the removal.
func (n *Node) forgetDir() {
	f := n.fsys
	fd, owned := f.dirs.forget(n)
	if w := f.watch; w != nil {
		markFd := fd
		if markFd < 0 && w.Fanotify() {
			if h := f.dirs.handleOf(n); h != nil && !f.dirs.noHandles.Load() {
				if hfd, err := dirfd.OpenDirByHandle(f.dirs.mountFd, *h); err == nil {
					markFd = hfd
					defer dirfd.Close(hfd)
				}
			}
		}
		w.Remove(n, markFd)
	}
	if owned && fd >= 0 {
		dirfd.Close(fd)
	}
}
