package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"realm/errcode"
	"realm/fusefs/dirfd"
)

var (
	_ = (fs.NodeMkdirer)((*Node)(nil))
	_ = (fs.NodeMknoder)((*Node)(nil))
	_ = (fs.NodeSymlinker)((*Node)(nil))
	_ = (fs.NodeLinker)((*Node)(nil))
	_ = (fs.NodeUnlinker)((*Node)(nil))
	_ = (fs.NodeRmdirer)((*Node)(nil))
	_ = (fs.NodeRenamer)((*Node)(nil))
)

// claim gives a just-created object, held by fd, to the caller, when the
// daemon creates on behalf of other users. In a set-group-ID directory the
// group stays the directory's, as the kernel would have made it.
func (f *FS) claim(ctx context.Context, dir *Node, fd int) syscall.Errno {
	if !f.opts.ChownToCaller {
		return 0
	}
	c := caller(ctx)
	if c.Uid == 0 && c.Gid == 0 {
		return 0
	}
	gid := int(c.Gid)
	pfd, errno := dir.dirFd(ctx)
	if errno != 0 {
		return errno
	}
	var pst unix.Stat_t
	if err := dirfd.Fstat(pfd, &pst); err == nil && pst.Mode&syscall.S_ISGID != 0 {
		gid = -1
	}
	return toErrno(dirfd.Chown(fd, int(c.Uid), gid))
}

// createNamed finishes making a directory, fifo, socket or symlink by name:
// make is called with a mode with no permission bits, so that the object can
// be recognised as the one this call made (a root-made object no one can
// open yet) before it is given to the caller and its mode is set. Without
// ownership to hand over, make gets the final mode and no check is needed.
func (n *Node) createNamed(ctx context.Context, op, name string, mode uint32, make func(pfd int, mode uint32) error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fsys.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	if hiddenName(name) {
		return nil, n.fsys.refuse(ctx, op, n, name, errcode.PathEscape)
	}
	pfd, errno := n.dirFd(ctx)
	if errno != 0 {
		return nil, errno
	}
	isLink := mode&syscall.S_IFMT == syscall.S_IFLNK
	handOver := n.fsys.opts.ChownToCaller && caller(ctx).Uid != 0
	first := mode
	if handOver && !isLink {
		first = mode &^ 07777
	}
	if err := make(pfd, first&07777); err != nil {
		return nil, toErrno(err)
	}
	fd, err := dirfd.OpenPath(pfd, name)
	if err != nil {
		return nil, toErrno(err)
	}
	defer dirfd.Close(fd)
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	if st.Mode&syscall.S_IFMT != mode&syscall.S_IFMT || (handOver && !isLink && (st.Mode&07777 != 0 || st.Uid != uint32(unix.Geteuid()))) {
		// Not what this call made: something outside swapped it in.
		return nil, n.fsys.refuse(ctx, op, n, name, errcode.PathEscape)
	}
	if handOver {
		if errno := n.fsys.claim(ctx, n, fd); errno != 0 {
			dirfd.Unlink(pfd, name, unlinkFlags(mode))
			return nil, errno
		}
		if !isLink {
			if err := dirfd.Chmod(fd, mode&07777); err != nil {
				dirfd.Unlink(pfd, name, unlinkFlags(mode))
				return nil, toErrno(err)
			}
		}
	}
	gen, errno := statNew(fd, &st)
	if errno != 0 {
		return nil, errno
	}
	n.fsys.fillEntry(out, &st)
	return n.newChild(ctx, &st, gen), 0
}

func unlinkFlags(mode uint32) int {
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		return unix.AT_REMOVEDIR
	}
	return 0
}

// Mkdir makes a directory by name in n's verified fd (mkdirat), checked
// as createNamed does.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	if h := n.fsys.opts.BeforeMkdir; h != nil {
		h(name)
	}
	return n.createNamed(ctx, "mkdir", name, syscall.S_IFDIR|mode&07777, func(pfd int, m uint32) error {
		return dirfd.Mkdir(pfd, name, m)
	}, out)
}

// Mknod makes fifos, sockets and regular files; device nodes would give
// agents raw devices and are refused with EPERM.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFREG:
	case 0:
		mode |= syscall.S_IFREG
	default:
		return nil, syscall.EPERM
	}
	typ := mode & syscall.S_IFMT
	return n.createNamed(ctx, "mknod", name, mode, func(pfd int, m uint32) error {
		return dirfd.Mknod(pfd, name, typ|m, 0)
	}, out)
}

// Symlink creates a link whose target stays beneath the root; any other
// target is refused (PATH_ESCAPE) and nothing is created.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	if !staysInside(n.fsys.depth(n), target) {
		return nil, n.fsys.refuse(ctx, "symlink", n, name, errcode.PathEscape)
	}
	if rel := lexicalTarget(n.fsys.relPath(n, ""), target); n.fsys.credentialDenied(rel) {
		return nil, n.fsys.refuseRel(ctx, "symlink", n.fsys.relPath(n, name), errcode.CredentialPathDenied)
	}
	return n.createNamed(ctx, "symlink", name, syscall.S_IFLNK|0777, func(pfd int, _ uint32) error {
		return dirfd.Symlink(target, pfd, name)
	}, out)
}

// Link makes name in n a hard link to target's verified object.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	if n.fsys.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	if hiddenName(name) {
		return nil, n.fsys.refuse(ctx, "link", n, name, errcode.PathEscape)
	}
	tn, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if errno := n.fsys.denyPath(ctx, "link", tn, ""); errno != 0 {
		return nil, errno
	}
	if errno := n.fsys.denyPath(ctx, "link", n, name); errno != 0 {
		return nil, errno
	}
	fd, errno := tn.openPath(ctx, "link")
	if errno != 0 {
		return nil, errno
	}
	defer dirfd.Close(fd)
	pfd, errno := n.dirFd(ctx)
	if errno != 0 {
		return nil, errno
	}
	if err := dirfd.Link(fd, pfd, name); err != nil {
		return nil, toErrno(err)
	}
	tn.ownChange(nil)
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	n.fsys.fillEntry(out, &st)
	// A hard link is another name of the same node.
	out.Ino = tn.StableAttr().Ino
	return tn.EmbeddedInode(), 0
}

// Unlink removes a name from n (unlinkat on n's verified fd); a file
// another owner is writing is EBUSY.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, 0)
}

// Rmdir removes an empty directory from n (unlinkat with AT_REMOVEDIR).
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, unix.AT_REMOVEDIR)
}

func (n *Node) remove(ctx context.Context, name string, flags int) syscall.Errno {
	defer n.enter()()
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if hiddenName(name) {
		return syscall.ENOENT
	}
	pfd, errno := n.dirFd(ctx)
	if errno != 0 {
		return errno
	}
	// Removing a file another owner is writing would drop that owner's
	// bytes at its commit: refused like renaming over it.
	if flags == 0 {
		if errno := n.fsys.heldByOther(ctx, "unlink", n, pfd, name); errno != 0 {
			return errno
		}
	}
	return toErrno(dirfd.Unlink(pfd, name, flags))
}

// Rename is one renameat2 between two verified directory fds; flags
// (RENAME_NOREPLACE, RENAME_EXCHANGE) pass through.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	defer n.enter()()
	if np, ok := newParent.(*Node); ok && np != n {
		defer np.enter()()
	}
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if hiddenName(name) || hiddenName(newName) {
		return n.fsys.refuse(ctx, "rename", n, name, errcode.PathEscape)
	}
	if errno := n.fsys.denyPath(ctx, "rename", n, name); errno != 0 {
		return errno
	}
	if errno := n.fsys.denyPath(ctx, "rename", np, newName); errno != 0 {
		return errno
	}
	if errno := n.fsys.denyDirRename(ctx, n, name); errno != 0 {
		return errno
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if errno := n.fsys.denyDirRename(ctx, np, newName); errno != 0 {
			return errno
		}
	}
	ofd, errno := n.dirFd(ctx)
	if errno != 0 {
		return errno
	}
	nfd, errno := np.dirFd(ctx)
	if errno != 0 {
		return errno
	}
	if errno := n.fsys.heldByOther(ctx, "rename", np, nfd, newName); errno != 0 {
		return errno
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if errno := n.fsys.heldByOther(ctx, "rename", n, ofd, name); errno != 0 {
			return errno
		}
	}
	srcKey, srcHeld := n.fsys.fileKey(ofd, name)
	dstKey, dstHeld := n.fsys.fileKey(nfd, newName)
	if err := dirfd.Rename(ofd, name, nfd, newName, uint(flags)); err != nil {
		return toErrno(err)
	}
	// A write in progress follows its file to the new name.
	if srcHeld {
		n.fsys.moved(srcKey, np, nfd, newName)
	}
	if dstHeld && flags&unix.RENAME_EXCHANGE != 0 {
		n.fsys.moved(dstKey, n, ofd, name)
	}
	return 0
}
