package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Directory fds. Every directory node holds an O_PATH fd of its directory
// while it is in use (Node.dirFd), but not for as long as the kernel caches
// the node: a process that walks 100,000 directories (find, git status)
// leaves the kernel caching all of them, and one fd each would take every
// descriptor the daemon has. So a directory fd no request uses is idle, and
// the daemon keeps at most a bound of idle ones (fusefs/dircache;
// fdbudget.DirFdBound: an eighth of its descriptor limit, at most 4096),
// closing the least recently used beyond that. A node whose fd was closed
// opens it again at its next use: by the directory's file handle (kept at
// the close, open_by_handle_at, which needs CAP_DAC_READ_SEARCH) or else
// by name from its parent's fd as at first use; either way the fd is
// checked against the node's (dev, ino), and at every use against the root
// (stillInside), as before. A handle,
// like the fd it replaces, follows its directory wherever the host renames
// it; one moved out is ESTALE, PATH_ESCAPE, as with the fd kept open.
//
// A use pins the fd (dirFd returns the unpin): a pinned fd is never closed,
// so no request ever acts on a descriptor number closed (and reused)
// under it. The descriptors open are so the idle bound plus those pinned
// by requests in progress (the fdbudget reserve's inFlightFds).

// noUnpin is the unpin of a use that pinned nothing.
func noUnpin() {}

// dirFd returns the O_PATH fd of directory n, pinned until the caller
// calls done (always, also on error), opening and verifying it if it has
// none open (dircache.Cache.Use: by the handle kept, else by name).
//
// The fd follows its directory wherever the host renames it, so each use
// asks first whether the directory is still beneath the root (stillInside):
// one moved out of BACKING is gone for the mount (ESTALE), even to a
// process whose working directory it is.
func (n *Node) dirFd(ctx context.Context) (fd int, done func(), errno syscall.Errno) {
	fd, _, _, done, errno = n.dirFdWhere(ctx)
	return fd, done, errno
}

// dirFdWhere is dirFd that also returns the directory's workspace path
// where its check read it (known; stillInside), so that an op judging a
// name in it under nsMu reads it once.
func (n *Node) dirFdWhere(ctx context.Context) (fd int, rel string, known bool, done func(), errno syscall.Errno) {
	f := n.fsys
	if n == f.root {
		return f.rootFd, "", true, noUnpin, 0
	}
	fd, done, first, errno := f.dirs.Use(&n.dcache, n.ident,
		func() (int, syscall.Errno) { return n.openDirByName(ctx) },
		func(fd int) (errno syscall.Errno) { rel, known, errno = n.stillInside(ctx, fd); return errno })
	if errno != 0 {
		return -1, "", false, noUnpin, errno
	}
	// A directory that cannot be watched is logged (the first) and keeps
	// the short cache timeouts (see Node.Lookup).
	if w := f.watch; w != nil && first && w.Add(n, fd, func() string { return n.Rel("") }) {
		n.watched.Store(true)
	}
	return fd, rel, known, done, 0
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
			return -1, n.fsys.gate.Refuse(ctx, "opendir", pn, name, errcode.PathEscape, admit.RuleEscapeResolve)
		}
		return -1, dirfd.Errno(err)
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		dirfd.Close(fd)
		return -1, dirfd.Errno(err)
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
// open, else one opened by its handle for the removal (dircache.Cache.Forget).
func (n *Node) forgetDir() {
	w := n.fsys.watch
	if w == nil {
		n.fsys.dirs.Forget(&n.dcache, nil, false)
		return
	}
	n.fsys.dirs.Forget(&n.dcache, func(fd int) { w.Remove(n, fd) }, w.Fanotify())
}

// OpendirHandle opens n for listing: "." reopened relative to n's own
// O_PATH fd names exactly the verified directory.
// Its errors pass openErrno: an ENOSYS here would end OPENDIR for the
// connection.
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.gate.AdmitOpen(ctx, "", "opendir", n, "", false); errno != 0 {
		return nil, 0, errno // the owner holds its bound of handles (admit.Gate.AdmitOpen)
	}
	// A listing shows every name: the unpublished ones made real first.
	if errno := n.fsys.contactDir(ctx, n); errno != 0 {
		return nil, 0, openErrno(errno)
	}
	pfd, done, errno := n.dirFd(ctx)
	if errno != 0 {
		return nil, 0, openErrno(errno)
	}
	fd, err := dirfd.ReopenDir(pfd)
	done()
	if err != nil {
		return nil, 0, openErrno(dirfd.Errno(err))
	}
	stream, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		dirfd.Close(fd)
		return nil, 0, openErrno(errno)
	}
	// The kernel may keep the listing across opens: changes through the
	// mount bump the directory's version, changes in BACKING reach it as an
	// invalidation from the watcher. Unwatched, it is read afresh.
	var fuseFlags uint32
	if n.watched.Load() {
		fuseFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return &dirHandle{node: n, stream: stream, hide: n.fsys.gate.HiddenIn(n)}, fuseFlags, 0
}
