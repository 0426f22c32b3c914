package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
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
