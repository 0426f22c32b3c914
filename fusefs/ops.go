package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
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

// nameUse says what an operation does with the name it is given, which
// decides how prepare refuses it.
type nameUse int

const (
	// removes: the op needs the name to exist and only removes it
	// (unlink, rmdir); its path is not judged (the policy denies a
	// credential's opens, creates, renames and links, not its removal).
	removes nameUse = iota
	// movesFrom: the op needs the name to exist and moves it away
	// (rename's source, and both names of an exchange).
	movesFrom
	// makes: the op makes the name (create, mknod, symlink, link, rename's
	// target).
	makes
	// makesDir: mkdir. A directory is judged by what it holds, each name
	// in it as it is made or opened, not by its own name: a policy may
	// allow .aws/config beneath a denied .aws/**, and the directory must
	// be makeable to hold it.
	makesDir
)

// prepare is the first step of every operation that makes, removes or
// renames a name in directory n. It runs the guard's checks in one order,
// and the first that fails answers:
//
//  1. a read-only mount: EROFS;
//  2. a hidden name (TempPrefix, realm's own temps): it does not exist on
//     the mount, so an operation that needs it to exist gets ENOENT, as
//     lookup does, and no audit line (nothing is there to refuse);
//     making one is refused, EACCES, audited PATH_ESCAPE;
//  3. n's directory fd, opened beneath its parent's and verified (dirFd):
//     a directory swapped since lookup is EACCES, PATH_ESCAPE;
//  4. the name's workspace path, when the op moves or makes a name other
//     than a directory's: a credential is EACCES, CREDENTIAL_PATH_DENIED,
//     unless nothing is there yet and the op makes it, or what is there was
//     made through the mount (denyName);
//  5. when the op makes the name, its path: a protected path is EACCES,
//     PROTECTED_PATH_DENIED.
//
// Escapes come before credentials (the README: an escaping credential path
// reports PATH_ESCAPE). What an op checks beyond this (a symlink's target, a
// link's source, a rename's locks) comes after. The fd returned is n's,
// valid while n lives: the op makes its one dirfd call on (fd, name), which
// acts on that one name beneath a verified directory without following it.
func (n *Node) prepare(ctx context.Context, op, name string, use nameUse) (int, syscall.Errno) {
	f := n.fsys
	if f.opts.ReadOnly {
		return -1, syscall.EROFS
	}
	if hiddenName(name) {
		if use == removes || use == movesFrom {
			return -1, syscall.ENOENT
		}
		return -1, f.refuse(ctx, op, n, name, errcode.PathEscape, RuleEscapeTempName)
	}
	pfd, errno := n.dirFd(ctx)
	if errno != 0 {
		return -1, errno
	}
	if use == movesFrom || use == makes {
		if errno := f.denyName(ctx, op, n, pfd, name, use); errno != 0 {
			return -1, errno
		}
	}
	if use == makes {
		if errno := f.denyProtect(ctx, op, n, name); errno != 0 {
			return -1, errno
		}
	}
	return pfd, 0
}

// claim gives a just-created object, held by fd, to the caller, when the
// daemon creates on behalf of other users. In a set-group-ID directory the
// group stays the directory's, as the kernel would have made it.
func (f *FS) claim(ctx context.Context, pfd int, fd int) syscall.Errno {
	if !f.opts.ChownToCaller {
		return 0
	}
	c := caller(ctx)
	if c.Uid == 0 && c.Gid == 0 {
		return 0
	}
	gid := int(c.Gid)
	var pst unix.Stat_t
	if err := dirfd.Fstat(pfd, &pst); err == nil && pst.Mode&syscall.S_ISGID != 0 {
		gid = -1
	}
	return toErrno(dirfd.Chown(fd, int(c.Uid), gid))
}

// createNamed finishes making a directory, fifo, socket or symlink by name
// in n, whose fd pfd prepare returned: make is called with a mode with no
// permission bits, so that the object can be recognised as the one this
// call made (a root-made object no one can open yet) before it is given to
// the caller and its mode is set. Without ownership to hand over, make gets
// the final mode and no check is needed. The final mode is the caller's
// mode as the kernel would make it natively (newMode: its umask, or the
// directory's default ACL); a symlink's is always 0777.
func (n *Node) createNamed(ctx context.Context, op string, pfd int, name string, mode uint32, make func(mode uint32) error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	isLink := mode&syscall.S_IFMT == syscall.S_IFLNK
	isDir := mode&syscall.S_IFMT == syscall.S_IFDIR
	if !isLink {
		mode = mode&syscall.S_IFMT | newMode(ctx, pfd, mode)
	}
	handOver := n.fsys.opts.ChownToCaller && caller(ctx).Uid != 0
	first := mode
	if handOver && !isLink {
		first = mode &^ 07777
	}
	if err := make(first & 07777); err != nil {
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
	// A directory made in a set-group-ID directory is set-group-ID too,
	// whatever mode it was made with, and keeps that bit.
	inherited := uint32(0)
	if isDir {
		inherited = st.Mode & syscall.S_ISGID
	}
	if st.Mode&syscall.S_IFMT != mode&syscall.S_IFMT || (handOver && !isLink && (st.Mode&07777 != inherited || st.Uid != uint32(unix.Geteuid()))) {
		// Not what this call made: something outside swapped it in.
		return nil, n.fsys.refuse(ctx, op, n, name, errcode.PathEscape, RuleEscapeSwapped)
	}
	if handOver {
		if errno := n.fsys.claim(ctx, pfd, fd); errno != 0 {
			dirfd.Unlink(pfd, name, unlinkFlags(mode))
			return nil, errno
		}
		if !isLink {
			if err := dirfd.Chmod(fd, mode&07777|inherited); err != nil {
				dirfd.Unlink(pfd, name, unlinkFlags(mode))
				return nil, toErrno(err)
			}
		}
	}
	gen, errno := statNew(fd, &st)
	if errno != 0 {
		return nil, errno
	}
	n.fsys.madeNew(n.fsys.relPath(n, name), &st, gen)
	n.fsys.fillEntry(out, &st)
	child := n.newChild(ctx, &st, gen)
	out.SetAttrTimeout(asNode(child).attrValid())
	return child, 0
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
	pfd, errno := n.prepare(ctx, "mkdir", name, makesDir)
	if errno != 0 {
		return nil, errno
	}
	// A hidden credential does not exist on the mount: answering EEXIST
	// would say it does, so making one is refused like a create.
	if n.fsys.hiding() {
		if errno := n.fsys.denyPath(ctx, "mkdir", n, name); errno != 0 {
			return nil, errno
		}
	}
	return n.createNamed(ctx, "mkdir", pfd, name, syscall.S_IFDIR|mode&07777, func(m uint32) error {
		return dirfd.Mkdir(pfd, name, m)
	}, out)
}

// Mknod makes fifos, sockets and regular files. Device nodes are refused,
// EPERM, audited DEVICE_NODE_DENIED, even to a caller with CAP_MKNOD (the
// kernel checks that before it asks): the mount is nodev, but BACKING is a
// directory of the host, where a node a sandboxed root made would open as
// the device for any host process allowed to open it.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	pfd, errno := n.prepare(ctx, "mknod", name, makes)
	if errno != 0 {
		return nil, errno
	}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFREG:
	case 0:
		mode |= syscall.S_IFREG
	default:
		return nil, n.fsys.refuse(ctx, "mknod", n, name, errcode.DeviceNodeDenied, RuleDeviceNode)
	}
	typ := mode & syscall.S_IFMT
	return n.createNamed(ctx, "mknod", pfd, name, mode, func(m uint32) error {
		return dirfd.Mknod(pfd, name, typ|m, 0)
	}, out)
}

// Symlink creates a link whose target stays beneath the root; any other
// target is refused (PATH_ESCAPE) and nothing is created, as is a target
// that is a credential, and a name that is a protected path or a protected
// directory prefix (PROTECTED_PATH_DENIED).
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	f := n.fsys
	pfd, errno := n.prepare(ctx, "symlink", name, makes)
	if errno != 0 {
		return nil, errno
	}
	if !staysInside(f.depth(n), target) || targetHidden(target) {
		return nil, f.refuse(ctx, "symlink", n, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	if rel := lexicalTarget(f.relPath(n, ""), target); f.credentialDenied(rel) {
		return nil, f.refuseCredential(ctx, "symlink", f.relPath(n, name), rel)
	}
	if errno := f.denySymlinkPlant(ctx, n, name); errno != 0 {
		return nil, errno
	}
	return n.createNamed(ctx, "symlink", pfd, name, syscall.S_IFLNK|0777, func(uint32) error {
		return dirfd.Symlink(target, pfd, name)
	}, out)
}

// Link makes name in n a hard link to target's verified object; a
// credential is refused as the link's source as well as its name.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	pfd, errno := n.prepare(ctx, "link", name, makes)
	if errno != 0 {
		return nil, errno
	}
	tn, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	fd, errno := tn.openPath(ctx, "link")
	if errno != 0 {
		return nil, errno
	}
	defer dirfd.Close(fd)
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	if errno := n.fsys.denyPathStat(ctx, "link", tn, "", &st); errno != 0 {
		return nil, errno
	}
	// Another name of a protected file would be one to write it by.
	if errno := n.fsys.denyProtect(ctx, "link", tn, ""); errno != 0 {
		return nil, errno
	}
	if err := n.fsys.ownMadeChange([]int{fd}, func() error { return dirfd.Link(fd, pfd, name) }); err != nil {
		return nil, toErrno(err)
	}
	tn.ownChange(nil)
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	// A file the mount may read, linked onto a credential name, holds what
	// the caller could read already: made through the mount.
	n.fsys.madeNew(n.fsys.relPath(n, name), &st, tn.fileID().gen)
	n.fsys.fillEntry(out, &st)
	// A hard link is another name of the same node.
	out.Ino = tn.StableAttr().Ino
	out.SetAttrTimeout(tn.attrValid())
	return tn.EmbeddedInode(), 0
}

// Unlink removes a name from n (unlinkat on n's verified fd); a file
// another owner is writing is EBUSY.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, "unlink", name, 0)
}

// Rmdir removes an empty directory from n (unlinkat with AT_REMOVEDIR).
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, "rmdir", name, unix.AT_REMOVEDIR)
}

// remove is Unlink and Rmdir: one unlinkat on n's verified fd.
func (n *Node) remove(ctx context.Context, op, name string, flags int) syscall.Errno {
	defer n.enter()()
	pfd, errno := n.prepare(ctx, op, name, removes)
	if errno != 0 {
		return errno
	}
	// Removing a file another owner is writing would drop that owner's
	// bytes at its commit: refused like renaming over it.
	var l fileLock
	if flags == 0 {
		l = n.fsys.lockOf(pfd, name)
		if errno := n.fsys.heldByOther(ctx, "unlink", n, name, l); errno != 0 {
			return errno
		}
	}
	// Another name of a made file may stay: its ctime moves.
	mfd := n.fsys.madeFd(pfd, name)
	defer dirfd.Close(mfd)
	err := n.fsys.ownMadeChange([]int{mfd}, func() error { return dirfd.Unlink(pfd, name, flags) })
	if err == syscall.ENOTEMPTY && n.fsys.sweepBeforeRmdir(pfd, name) {
		err = dirfd.Unlink(pfd, name, flags)
	}
	if err != nil {
		return toErrno(err)
	}
	if l.held {
		n.fsys.removed(l.key, pfd, name) // the owner's own write goes with the file
	}
	return 0
}

// Rename is one renameat2 between two verified directory fds; flags
// (RENAME_NOREPLACE, RENAME_EXCHANGE) pass through. Each name is prepared
// (the source, then the target), then RENAME_WHITEOUT is refused
// (PATH_ESCAPE: it would leave a 0:0 character device at the source name,
// a device node Mknod refuses), then a directory holding a credential,
// then a file another owner is writing.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	defer n.enter()()
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if np != n {
		defer np.enter()()
	}
	f := n.fsys
	exchange := flags&unix.RENAME_EXCHANGE != 0
	ofd, errno := n.prepare(ctx, "rename", name, movesFrom)
	if errno != 0 {
		return errno
	}
	targetUse := makes
	if exchange {
		targetUse = movesFrom
	}
	nfd, errno := np.prepare(ctx, "rename", newName, targetUse)
	if errno != 0 {
		return errno
	}
	if flags&unix.RENAME_WHITEOUT != 0 {
		return f.refuse(ctx, "rename", n, name, errcode.PathEscape, RuleEscapeWhiteout)
	}
	if exchange {
		// Each name receives the other's object.
		if errno := f.denyProtect(ctx, "rename", n, name); errno != 0 {
			return errno
		}
		if errno := f.denyProtect(ctx, "rename", np, newName); errno != 0 {
			return errno
		}
	}
	if errno := f.denyDirRename(ctx, n, ofd, name, f.relPath(np, newName)); errno != 0 {
		return errno
	}
	if exchange {
		if errno := f.denyDirRename(ctx, np, nfd, newName, f.relPath(n, name)); errno != 0 {
			return errno
		}
	}

	// One look at each name serves both the lock check and the write
	// that follows its file.
	src, dst := f.lockOf(ofd, name), f.lockOf(nfd, newName)
	if errno := f.heldByOther(ctx, "rename", np, newName, dst); errno != 0 {
		return errno
	}
	if exchange {
		if errno := f.heldByOther(ctx, "rename", n, name, src); errno != 0 {
			return errno
		}
	}
	// The file renamed, and a file replaced or exchanged that keeps
	// another name: the rename moves their ctimes.
	sfd, dfd := f.madeFd(ofd, name), f.madeFd(nfd, newName)
	defer dirfd.Close(sfd)
	defer dirfd.Close(dfd)
	if err := f.ownMadeChange([]int{sfd, dfd}, func() error { return dirfd.Rename(ofd, name, nfd, newName, uint(flags)) }); err != nil {
		return toErrno(err)
	}
	f.madeRenamed(nfd, np, newName)
	if exchange {
		f.madeRenamed(ofd, n, name)
	}
	// A write in progress follows its file to the new name (renamed finds
	// none if it ended meanwhile).
	if src.held {
		f.renamed(src.key, np, nfd, newName)
	}
	if dst.held && exchange {
		f.renamed(dst.key, n, ofd, name)
	}
	if dst.held && !exchange && dst.key != src.key {
		// The caller's owner's own write of the file replaced (another's
		// was refused) goes with that file, as natively.
		f.removed(dst.key, nfd, newName)
	}
	return 0
}
