package fusefs

import (
	"cmp"
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/nameops"
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
//     made through the mount (guard.Guard.NameDenied);
//  5. when the op makes the name, its path: a protected path is EACCES,
//     PROTECTED_PATH_DENIED.
//
// Steps 1 and 2 are guard.AdmitEntry's, 4 and 5 guard.Guard.JudgeName's;
// what is here opens the fd and audits. Escapes come before credentials
// (docs/threat-model.md: an escaping credential path reports PATH_ESCAPE). What an
// op checks beyond this (a symlink's target, a link's source, a rename's
// locks) comes after. The fd returned is n's, pinned until the caller
// calls done (dircache.go; a no-op on error): the op makes its one dirfd
// call on (fd, name), which acts on that one name beneath a verified
// directory without following it. The path returned is n's workspace path
// as the kernel has it now (the readlink of the fd's check, stillInside,
// else admit.Gate.DirRel; "" for guard.Removes, which judges no path): an op that makes a name holds nsMu shared from prepare
// through its system call, so that no directory rename moves the name's place
// between the two.
func (n *Node) prepare(ctx context.Context, op, name string, use guard.Use) (_ int, dir string, done func(), _ syscall.Errno) {
	pfd, dir, known, done, errno := n.prepareWhere(ctx, op, name, use)
	if errno != 0 || use == guard.Removes {
		return pfd, "", done, errno
	}
	if !known { // the fd was opened by name now, or the kernel gave no path
		dir = n.fsys.gate.DirRel(n, pfd)
	}
	if errno := n.fsys.gate.JudgeName(ctx, op, pfd, admit.Join(dir, name), name, use); errno != 0 {
		done()
		return -1, "", noUnpin, errno
	}
	return pfd, dir, done, 0
}

// prepareWhere is prepare up to the name's judgement, with n's path as
// the check of its fd read it (known false: not read).
func (n *Node) prepareWhere(ctx context.Context, op, name string, use guard.Use) (pfd int, dir string, known bool, done func(), _ syscall.Errno) {
	if errno := n.fsys.gate.AdmitEntry(ctx, op, n, name, use); errno != 0 {
		return -1, "", false, noUnpin, errno
	}
	return n.dirFdWhere(ctx)
}

// createNamed finishes making a directory, fifo, socket or symlink by name
// in n, whose fd pfd prepare returned (rel: the new name's workspace
// path), through nameops.Ops.Make (which says how the object is known for
// the one this call made before it is given to the caller), and answers
// with its node.
func (n *Node) createNamed(ctx context.Context, op string, pfd int, rel, name string, mode uint32, make func(mode uint32) error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st unix.Stat_t
	gen, errno := n.fsys.nameOps.Make(ctx, op, n, pfd, rel, name, mode, make, &st)
	if errno != 0 {
		return nil, errno
	}
	n.fsys.fillEntry(out, &st)
	child := n.newChild(ctx, &st, gen)
	out.SetAttrTimeout(asNode(child).attrValid())
	return child, 0
}

// Mkdir makes a directory by name in n's verified fd (mkdirat), checked
// as createNamed does.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	if h := n.fsys.opts.BeforeMkdir; h != nil {
		h(name)
	}
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, errno
	}
	defer n.fsys.nsLock(false)()
	pfd, dir, done, errno := n.prepare(ctx, "mkdir", name, guard.MakesDir)
	defer done()
	if errno != 0 {
		return nil, errno
	}
	// A hidden credential does not exist on the mount: answering EEXIST
	// would say it does, so making one is refused like a create.
	if errno := n.fsys.gate.DenyHiddenCredential(ctx, "mkdir", n, name); errno != 0 {
		return nil, errno
	}
	return n.createNamed(ctx, "mkdir", pfd, admit.Join(dir, name), name, syscall.S_IFDIR|mode&07777, func(m uint32) error {
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
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, errno
	}
	defer n.fsys.nsLock(false)()
	pfd, dir, done, errno := n.prepare(ctx, "mknod", name, guard.Makes)
	defer done()
	if errno != 0 {
		return nil, errno
	}
	mode, ok := guard.MknodMode(mode)
	if !ok {
		return nil, n.fsys.gate.Refuse(ctx, "mknod", n, name, errcode.DeviceNodeDenied, admit.RuleDeviceNode)
	}
	typ := mode & syscall.S_IFMT
	return n.createNamed(ctx, "mknod", pfd, admit.Join(dir, name), name, mode, func(m uint32) error {
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
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, errno
	}
	defer f.nsLock(false)()
	pfd, dir, done, errno := n.prepare(ctx, "symlink", name, guard.Makes)
	defer done()
	if errno != 0 {
		return nil, errno
	}
	if errno := f.gate.DenySymlink(ctx, n, dir, name, target); errno != 0 {
		return nil, errno
	}
	return n.createNamed(ctx, "symlink", pfd, admit.Join(dir, name), name, syscall.S_IFLNK|0777, func(uint32) error {
		return dirfd.Symlink(target, pfd, name)
	}, out)
}

// Link makes name in n a hard link to target's verified object; a
// credential is refused as the link's source as well as its name.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	// The source's checks wait for the mount-time scan (guard.IDs.Has):
	// not under nsMu.
	n.fsys.guard.WaitScan()
	// The name, and the source (whose openPath comes under nsMu): real
	// before nsMu is taken.
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, errno
	}
	if tn, ok := target.(*Node); ok {
		if errno := n.fsys.contactNode(ctx, tn); errno != 0 {
			return nil, errno
		}
	}
	in, linked, errno := n.link(ctx, target, name, out)
	if linked != nil {
		// Not under nsMu either: a write's entry lock is taken above it
		// (a commit holds its entry into nsMu).
		linked.ownChange(nil)
	}
	return in, errno
}

// link is Link's step under nsMu: the checks and the link
// (nameops.Ops.Link). linked is the node linked, once the link is made.
func (n *Node) link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (in *fs.Inode, linked *Node, errno syscall.Errno) {
	defer n.fsys.nsLock(false)()
	pfd, dir, done, errno := n.prepare(ctx, "link", name, guard.Makes)
	defer done()
	if errno != 0 {
		return nil, nil, errno
	}
	tn, ok := target.(*Node)
	if !ok {
		return nil, nil, syscall.EXDEV
	}
	fd, errno := tn.openPath(ctx, "link")
	if errno != 0 {
		return nil, nil, errno
	}
	defer dirfd.Close(fd)
	var st unix.Stat_t
	made, errno := n.fsys.nameOps.Link(ctx, n, pfd, dir, name, tn, fd, &st)
	if made {
		linked = tn
	}
	if errno != 0 {
		return nil, linked, errno
	}
	n.fsys.fillEntry(out, &st)
	// A hard link is another name of the same node.
	out.Ino = tn.StableAttr().Ino
	out.SetAttrTimeout(tn.attrValid())
	return tn.EmbeddedInode(), tn, 0
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

// remove is Unlink and Rmdir: one unlinkat on n's verified fd
// (nameops.Ops.Remove), which takes n's path from the check of the fd
// where no directory was renamed through the mount since
// (nameops.DirPath): one readlink less.
func (n *Node) remove(ctx context.Context, op, name string, flags int) syscall.Errno {
	defer n.enter()()
	// An rmdir meets the names of the directory it removes; an unlink's
	// file holds none.
	if errno := cmp.Or(n.fsys.contactName(ctx, n, name), n.fsys.contactMoved(ctx, n, name, flags == 0)); errno != 0 {
		return errno
	}
	gen := n.fsys.nameOps.PathGen()
	pfd, dir, known, done, errno := n.prepareWhere(ctx, op, name, guard.Removes)
	defer done()
	if errno != 0 {
		return errno
	}
	return n.fsys.nameOps.Remove(ctx, op, n, pfd, nameops.DirPath{Rel: dir, Gen: gen, Known: known}, name, flags)
}

// Rename is one renameat2 between two verified directory fds; flags
// (RENAME_NOREPLACE, RENAME_EXCHANGE) pass through. Each name's directory
// is prepared up to the name's judgement (prepareWhere: the source, then
// the target; one directory's fd and path serve both names); the names are
// judged, under nsMu, and renamed by nameops.Ops.Rename, which says in
// what order.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	defer n.enter()()
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if np != n {
		defer np.enter()()
	}
	// Either name's file, and those beneath a directory either holds (one
	// moves, or both; a directory replaced must be empty).
	if errno := cmp.Or(n.fsys.contactName(ctx, n, name), n.fsys.contactName(ctx, np, newName),
		n.fsys.contactMoved(ctx, n, name, false), n.fsys.contactMoved(ctx, np, newName, true)); errno != 0 {
		return errno
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0
	gen := n.fsys.nameOps.PathGen()
	ofd, oldDir, oldKnown, doneOld, errno := n.prepareWhere(ctx, "rename", name, guard.MovesFrom)
	defer doneOld()
	if errno != 0 {
		return errno
	}
	// Within one directory (most renames: a save, git's lockfiles) its fd
	// and the path its check read serve both names.
	nfd, newDir, newKnown := ofd, oldDir, oldKnown
	if np != n {
		var doneNew func()
		nfd, newDir, newKnown, doneNew, errno = np.prepareWhere(ctx, "rename", newName, guard.RenameTarget(exchange))
		defer doneNew()
	} else {
		errno = n.fsys.gate.AdmitEntry(ctx, "rename", n, newName, guard.RenameTarget(exchange))
	}
	if errno != 0 {
		return errno
	}
	oldAt := nameops.DirPath{Rel: oldDir, Gen: gen, Known: oldKnown}
	newAt := nameops.DirPath{Rel: newDir, Gen: gen, Known: newKnown}
	return n.fsys.nameOps.Rename(ctx, n, ofd, oldAt, name, np, nfd, newAt, newName, flags)
}
