package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/setattr"
	"github.com/realm-dev/realm/fusefs/unpublished"
	"github.com/realm-dev/realm/locks"
)

// Created files whose names are not in BACKING yet (fusefs/unpublished,
// writeengine newfile.go). Any request that reaches one or its name other
// than through the creating handle first makes it real (a contact, made
// holding no realm lock): the node's own requests (Node.parentFd), a
// lookup, create, mknod, mkdir, symlink, link or unlink of the name, a
// readdir of its directory, a rename or rmdir of the name or of a
// directory above it (contactMoved).

// publishesLater reports whether a create of rel (name in dir) with flags
// makes the file unpublished: not a path the guard keeps records of
// (guard.Guard.MadeNew), nor a coordinated one (written in place), nor an
// append (a log is read while written: its name is there at once), nor
// with durability=full where BACKING orders renamed data (a commit over
// the empty file spares the fsync a publish onto a free name needs).
func (f *FS) publishesLater(dir *Node, name, rel string, flags uint32) bool {
	return flags&syscall.O_APPEND == 0 && !(f.opts.Durability == DurabilityFull && f.ordersRenames) &&
		!f.guard.Denied(rel) && !f.guard.Protected(rel) && !f.coordinated(dir, name)
}

// makeReal is the contacts' unpublished.MakeReal.
func (f *FS) makeReal(ctx context.Context, e unpublished.Entry[*Node]) syscall.Errno {
	return f.engine.MakeReal(ctx, e.Key, e.Owner)
}

// contactNode, contactName and contactDir make real the unpublished file
// n stands for, the one to be named name in dir, and those in dir.
func (f *FS) contactNode(ctx context.Context, n *Node) syscall.Errno {
	return f.unpublished.ContactNode(ctx, n, f.makeReal)
}

func (f *FS) contactName(ctx context.Context, dir *Node, name string) syscall.Errno {
	if f.unpublished.Empty() { // every lookup asks: not even dir's key then
		return 0
	}
	return f.unpublished.ContactName(ctx, unpublished.Name{Dir: dir.key(), Name: name}, f.makeReal)
}

func (f *FS) contactDir(ctx context.Context, dir *Node) syscall.Errno {
	if f.unpublished.Empty() {
		return 0
	}
	return f.unpublished.ContactDir(ctx, dir.key(), f.makeReal)
}

// contactMoved makes real the unpublished files beneath the directory
// the kernel knows as name in dir (a rename moves it, an rmdir removes
// it), not others. Every directory above one is a node: a target without
// one (the kernel found nothing) holds none, nor does a file's; another
// name without one may hold any.
func (f *FS) contactMoved(ctx context.Context, dir *Node, name string, target bool) syscall.Errno {
	if f.unpublished.Empty() {
		return 0
	}
	moved := dir.childInode(name)
	if moved == nil && target || moved != nil && !moved.IsDir() {
		return 0
	}
	return f.unpublished.ContactBeneath(ctx, moved, f.root.EmbeddedInode(), (*Node).EmbeddedInode, f.makeReal)
}

// ownUnpublished runs fn on the content of n's file (its write's temp)
// for its owner while it is unpublished, without making it real: a stat,
// the kernel's question for security.capability before a chown. ok false
// if n is no such file or ctx is another owner's.
func (f *FS) ownUnpublished(ctx context.Context, n *Node, fn func(fd int) syscall.Errno) (errno syscall.Errno, ok bool) {
	e, pending := f.unpublished.Of(n)
	if !pending || f.owner(ctx) != e.Owner {
		return 0, false
	}
	w := f.engine.OwnWrite(e.Owner, e.Key)
	if w == nil {
		return 0, false
	}
	defer w.Entry().Unlock()
	if !w.Unpublished() {
		return 0, false
	}
	return fn(w.Cur()), true
}

// setattrUnpublished makes a metadata change of n by its owner while n's
// file is unpublished (fchmod, fchown, futimens: tar's before its close)
// to the write's temp, which is the file and which nothing else sees yet:
// judged as any change of the file (the protect rule's chmod, the node's
// own path), journaled with the create that publishes it. ok false: n is
// no such file or ctx is another owner's, and the change is made as any.
func (f *FS) setattrUnpublished(ctx context.Context, n *Node, in *fuse.SetAttrIn) (errno syscall.Errno, ok bool) {
	var st unix.Stat_t
	if errno, ok = f.ownUnpublished(ctx, n, func(fd int) syscall.Errno { return dirfd.Errno(dirfd.Fstat(fd, &st)) }); !ok || errno != 0 {
		return errno, ok
	}
	// Judged holding no lock (the guard may wait for the mount-time scan).
	if mode, chmod := in.GetMode(); chmod {
		if errno := f.gate.DenyChmod(ctx, n, syscall.S_IFREG, mode); errno != 0 {
			return errno, true
		}
	}
	if errno := f.gate.DenySelf(ctx, "setattr", n, &st, true); errno != 0 {
		return errno, true
	}
	return f.ownUnpublished(ctx, n, func(fd int) syscall.Errno { return setattr.Apply(fd, in) })
}

// createNew is Create's end for a file made unpublished in dir (fd
// pfd): the temp temp (fd, its stat st and generation gen) gets its
// node, its lock and the write's first handle.
func (f *FS) createNew(ctx context.Context, dir *Node, owner locks.Owner, name string, flags uint32, pfd int, temp string, fd int, gen uint64, st *unix.Stat_t, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	child := dir.newChild(ctx, st, gen)
	cn := asNode(child)
	lease, err := f.writeLocks.AcquireMode(locks.KeyOf(st), owner, locks.ModeFor(flags))
	if err != nil || !cn.opens.AdmitShared(true, time.Now()) {
		// A fresh inode no lock holds yet, unless an entry is stale under
		// its number (as Engine.Join's created case).
		lease.Release()
		dirfd.Close(fd)
		dirfd.Unlink(pfd, temp, 0)
		f.engine.TempMade(temp, false)
		f.logf("%s: the new file's inode number is held (ino %d); refused", dir.Rel(name), st.Ino)
		return nil, nil, 0, syscall.EIO
	}
	lease.Shared().NoteOpener(caller(ctx).Pid)
	e := lease.Shared()
	e.Lock()
	f.unpublished.Add(unpublished.Name{Dir: dir.key(), Name: name}, unpublished.Entry[*Node]{Node: cn, Key: locks.KeyOf(st), Owner: owner})
	file, err := f.engine.OpenNew(ctx, e, lease, owner, cn, child.StableAttr().Ino, dir, pfd, name, temp, fd, st, flags, f.processOf(caller(ctx).Pid))
	e.Unlock()
	if err != nil {
		f.unpublished.Remove(cn)
		cn.opens.SharedGone()
		return nil, nil, 0, dirfd.Errno(err)
	}
	f.fillEntry(out, st)
	out.SetAttrTimeout(cn.opens.CreatedAttrValid(f.attrTimeout))
	return child, &writeHandle{handle: handle{node: cn}, file: file}, fuse.FOPEN_DIRECT_IO, 0
}
