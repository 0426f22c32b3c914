package fusefs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
)

var (
	_ = (fs.NodeGetxattrer)((*Node)(nil))
	_ = (fs.NodeSetxattrer)((*Node)(nil))
	_ = (fs.NodeRemovexattrer)((*Node)(nil))
	_ = (fs.NodeListxattrer)((*Node)(nil))
)

// Extended attributes act on an O_PATH fd of the verified object, which
// prepareSelf opens.

// prepareSelf is prepare for an operation on n itself: a change on a
// read-only mount is EROFS; n's object is opened as an O_PATH fd and
// verified (openPath: a swapped object is PATH_ESCAPE); then, if judged,
// n's path and identity are asked (admit.Gate.DenySelf: a credential is
// CREDENTIAL_PATH_DENIED, and a change of a protected file
// PROTECTED_PATH_DENIED). Setattr's mode, owner and time changes and the
// xattr calls are judged here, in this one place. The caller acts through
// the fd and closes it.
func (n *Node) prepareSelf(ctx context.Context, op string, changes, judged bool) (int, syscall.Errno) {
	if changes && n.fsys.opts.ReadOnly {
		return -1, syscall.EROFS
	}
	fd, errno := n.openPath(ctx, op)
	if errno != 0 {
		return -1, errno
	}
	if judged {
		var st unix.Stat_t
		if err := dirfd.Fstat(fd, &st); err != nil {
			dirfd.Close(fd)
			return -1, dirfd.Errno(err)
		}
		if errno := n.fsys.gate.DenySelf(ctx, op, n, &st, changes); errno != 0 {
			dirfd.Close(fd)
			return -1, errno
		}
	}
	return fd, 0
}

// Getxattr reads an attribute through an O_PATH fd of the verified object
// (/proc/self/fd/N); user.* and trusted.* of a credential are refused,
// security.* and system.* are metadata (guard.MetadataXattr).
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	fd, errno := n.prepareSelf(ctx, "getxattr", false, !guard.MetadataXattr(attr))
	if errno != 0 {
		return 0, errno
	}
	defer dirfd.Close(fd)
	sz, err := dirfd.Getxattr(fd, attr, dest)
	return uint32(max(sz, 0)), dirfd.Errno(err)
}

// Setxattr sets an attribute through an O_PATH fd of the verified object,
// and on the owner's temp too, which becomes the file at its commit. Only
// the names hostmode.go allows are set: security.capability on a file the
// host runs would be a privilege there.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	fd, errno := n.prepareSelf(ctx, "setxattr", true, true)
	if errno != 0 {
		return errno
	}
	defer dirfd.Close(fd)
	if errno := n.fsys.gate.DenySetxattr(ctx, n, attr); errno != 0 {
		return errno
	}
	if errno := n.fsys.takeXattrRoom(ctx, n, len(attr)+len(data)); errno != 0 {
		return errno
	}
	if err := n.fsys.guard.OwnChange([]int{fd}, func() error { return dirfd.Setxattr(fd, attr, data, int(flags)) }); err != nil {
		return dirfd.Errno(err)
	}
	n.ownChange(func(temp int) error {
		if err := dirfd.Setxattr(temp, attr, data, int(flags)); err != nil {
			return fmt.Errorf("%s: %w", attr, err)
		}
		return nil
	})
	return 0
}

// Removexattr removes an attribute as Setxattr sets one, of the same
// names and security.capability (a host's label is the host's to change;
// dropping a capability grants nothing).
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	fd, errno := n.prepareSelf(ctx, "removexattr", true, true)
	if errno != 0 {
		return errno
	}
	defer dirfd.Close(fd)
	if errno := n.fsys.gate.DenyRemovexattr(ctx, n, attr); errno != 0 {
		return errno
	}
	if err := n.fsys.guard.OwnChange([]int{fd}, func() error { return dirfd.Removexattr(fd, attr) }); err != nil {
		return dirfd.Errno(err)
	}
	n.ownChange(func(temp int) error {
		if err := dirfd.Removexattr(temp, attr); err != nil && !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("%s: not removed: %w", attr, err)
		}
		return nil
	})
	return 0
}

// Listxattr lists the attributes of the verified object; a credential's
// list is refused.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	fd, errno := n.prepareSelf(ctx, "listxattr", false, true)
	if errno != 0 {
		return 0, errno
	}
	defer dirfd.Close(fd)
	names, err := dirfd.XattrNames(fd)
	if err != nil {
		return 0, dirfd.Errno(err)
	}
	var list []byte
	for _, name := range names {
		if guard.ListedXattr(name) {
			list = append(append(list, name...), 0)
		}
	}
	switch {
	case len(dest) == 0:
		return uint32(len(list)), 0
	case len(dest) < len(list):
		return 0, syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

// errNoXattrRoom is the cause a setxattr refused for want of room is
// audited with.
var errNoXattrRoom = errors.New("the file system has no room left for a writer that is not root (the rest is root's reserve): an attribute's value takes blocks too")

// takeXattrRoom takes the room an attribute of size bytes may take (ext4
// stores what does not fit in the inode in a block of its own, and with
// ea_inode a large value in inodes of its own): made as root, it would
// otherwise come out of root's reserve, as a write's bytes would
// (diskroom). ENOSPC past it, audited RESOURCE_LIMIT once per burst.
func (f *FS) takeXattrRoom(ctx context.Context, n *Node, size int) syscall.Errno {
	if f.room == nil {
		return 0
	}
	errno, first := f.room.Take(int64(size))
	if first && f.opts.Audit != nil {
		f.opts.Audit.RecordCause(ctx, "setxattr", n.Rel(""), errcode.ResourceLimit, errno, errNoXattrRoom)
	}
	return errno
}
