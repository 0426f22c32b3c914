package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// dirHandle is an open directory: go-fuse's fd-based stream over the backing
// directory with some names left out. Seeking, fsyncdir and release go to
// the stream it wraps.
type dirHandle struct {
	node   *Node
	stream fs.DirStream // from fs.NewLoopbackDirStreamFd
	hide   func(name string) bool
}

var (
	_ = (fs.NodeOpendirHandler)((*Node)(nil))
	_ = (fs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fs.FileFsyncdirer)((*dirHandle)(nil))
	_ = (fs.FileReleasedirer)((*dirHandle)(nil))
)

// OpendirHandle opens n for listing: "." reopened relative to n's own
// O_PATH fd names exactly the verified directory.
// Its errors pass openErrno: an ENOSYS here would end OPENDIR for the
// connection.
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.admitOpen(ctx, "", "opendir", n, "", 1); errno != 0 {
		return nil, 0, errno // the owner holds its bound of handles (fdcap.go)
	}
	pfd, done, errno := n.dirFd(ctx)
	if errno != 0 {
		return nil, 0, openErrno(errno)
	}
	fd, err := dirfd.ReopenDir(pfd)
	done()
	if err != nil {
		return nil, 0, openErrno(toErrno(err))
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
	return &dirHandle{node: n, stream: stream, hide: n.fsys.hiddenEntry(n)}, fuseFlags, 0
}

// Readdirent returns the next entry of the listing, skipping the names the
// mount never shows (temps, hidden credentials). Symlink-safe: the stream
// reads the directory fd OpendirHandle verified.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	defer d.node.enter()() // READDIR comes with the directory's lock held
	for {
		de, errno := d.stream.(fs.FileReaddirenter).Readdirent(ctx)
		if errno != 0 || de == nil {
			return de, errno
		}
		if de.Name == "." || de.Name == ".." || !d.hide(de.Name) {
			return de, 0
		}
	}
}

// Seekdir moves the listing to a position an earlier Readdirent returned.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.stream.(fs.FileSeekdirer).Seekdir(ctx, off)
}

// Fsyncdir syncs the verified directory the listing reads.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.stream.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
}

// Releasedir closes the listing's directory fd.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) { d.stream.Close() }

// hiddenEntry returns the filter for listing directory n: realm's temp
// files always, credentials too when the policy hides them.
func (f *FS) hiddenEntry(n *Node) func(name string) bool {
	if !f.hiding() {
		return hiddenName
	}
	return func(name string) bool {
		return hiddenName(name) || f.credentialDenied(f.relPath(n, name))
	}
}
