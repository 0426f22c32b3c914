package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"realm/fusefs/dirfd"
)

var (
	_ = (fs.NodeGetxattrer)((*Node)(nil))
	_ = (fs.NodeSetxattrer)((*Node)(nil))
	_ = (fs.NodeRemovexattrer)((*Node)(nil))
	_ = (fs.NodeListxattrer)((*Node)(nil))
)

// Extended attributes act on an O_PATH fd of the verified object.

// Getxattr reads an attribute through an O_PATH fd of the verified object
// (/proc/self/fd/N); user.* and trusted.* of a credential are refused.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	// security.* and system.* are metadata like the mode bits (capabilities,
	// SELinux labels, ACLs), which ls asks for on every entry; user.* and
	// trusted.* can hold content, and a credential's are refused.
	if !metadataXattr(attr) {
		if errno := n.fsys.denyPath(ctx, "getxattr", n, ""); errno != 0 {
			return 0, errno
		}
	}
	fd, errno := n.openPath(ctx, "getxattr")
	if errno != 0 {
		return 0, errno
	}
	defer dirfd.Close(fd)
	sz, err := dirfd.Getxattr(fd, attr, dest)
	return uint32(max(sz, 0)), toErrno(err)
}

// Setxattr sets an attribute through an O_PATH fd of the verified object,
// and on the owner's temp too, which becomes the file at its commit.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if errno := n.fsys.denyPath(ctx, "setxattr", n, ""); errno != 0 {
		return errno
	}
	fd, errno := n.openPath(ctx, "setxattr")
	if errno != 0 {
		return errno
	}
	defer dirfd.Close(fd)
	if err := dirfd.Setxattr(fd, attr, data, int(flags)); err != nil {
		return toErrno(err)
	}
	n.ownChange(func(temp int) { dirfd.Setxattr(temp, attr, data, int(flags)) })
	return 0
}

// Removexattr removes an attribute as Setxattr sets one.
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if errno := n.fsys.denyPath(ctx, "removexattr", n, ""); errno != 0 {
		return errno
	}
	fd, errno := n.openPath(ctx, "removexattr")
	if errno != 0 {
		return errno
	}
	defer dirfd.Close(fd)
	if err := dirfd.Removexattr(fd, attr); err != nil {
		return toErrno(err)
	}
	n.ownChange(func(temp int) { dirfd.Removexattr(temp, attr) })
	return 0
}

// Listxattr lists the attributes of the verified object; a credential's
// list is refused.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if errno := n.fsys.denyPath(ctx, "listxattr", n, ""); errno != 0 {
		return 0, errno
	}
	fd, errno := n.openPath(ctx, "listxattr")
	if errno != 0 {
		return 0, errno
	}
	defer dirfd.Close(fd)
	sz, err := dirfd.Listxattr(fd, dest)
	return uint32(max(sz, 0)), toErrno(err)
}

func metadataXattr(attr string) bool {
	return strings.HasPrefix(attr, "security.") || strings.HasPrefix(attr, "system.")
}
