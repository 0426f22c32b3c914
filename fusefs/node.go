package fusefs

import (
	"cmp"
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dircache"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/inodes"
	"github.com/realm-dev/realm/fusefs/journaling"
	"github.com/realm-dev/realm/fusefs/nodeopens"
	"github.com/realm-dev/realm/fusefs/reclock"
	"github.com/realm-dev/realm/fusefs/setattr"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// Node is one object of the mount. It knows the backing object it stands
// for by (dev, ino), never by path. A directory node also holds an O_PATH fd
// of its directory, opened lazily from its parent's fd and verified; every
// operation on a child is relative to that fd.
type Node struct {
	fs.Inode

	fsys *FS

	mu  lockorder.Mutex[lockorder.NodeMu]
	dev uint64 // the backing object's identity; changes only when an atomic
	ino uint64 // write of this mount replaces the file (see commit)
	gen uint64 // and its generation (dirfd.Statx), which tells reused numbers apart
	// dcache is a directory's O_PATH fd in the mount's cache of them
	// (dircache.go; guarded by the cache, not mu); the root's is
	// FS.rootFd.
	dcache dircache.Entry

	// recLocks is n's place among the lock sets of POSIX record locks and
	// flock (fusefs/reclock, guarded by FS.heirs): the per-locker fds, made
	// at first use and shared with a retired predecessor born as the same
	// file (see reclock.go).
	recLocks reclock.Place

	// opens are the handles open on n, by kind, and whether n is retired:
	// what a new open is admitted as (nodeopens, which says why).
	opens nodeopens.Set

	// watched: directories whose changes in BACKING the watcher reports;
	// their entries may be cached for the long timeouts (see watch.go).
	watched atomic.Bool
	// busy counts requests in progress that the kernel sends holding this
	// directory's lock; the notifier waits for none before it invalidates
	// an entry here (kernelnotify.New's busy).
	busy atomic.Int32
}

// enter counts a request on directory n that the kernel sends holding n's
// lock (lookup, create, remove, rename, readdir); call what it returns
// when the request is answered.
func (n *Node) enter() func() {
	n.busy.Add(1)
	return func() { n.busy.Add(-1) }
}

// retire takes n out of service for new opens, because the kernel would
// serve them through what n's open handles hold (a passthrough backing file,
// or a page cache, of an older version) instead of through the file as it
// is now. The open gets ESTALE, on which the kernel looks the name up again
// (LOOKUP_REVAL) and meets a new node for the file, with an inode number of
// its own while n lives (see package inodes); the handles open on n keep
// reading what they opened, as descriptors of a file replaced by rename do.
func (n *Node) retire() syscall.Errno {
	n.opens.Retire()
	key := n.key()
	n.fsys.inos.Retired(n, n.StableAttr().Ino, key, nodeopens.RetireHold)
	n.fsys.heirs.Bequeath(&n.recLocks, key)
	// The kernel's entry for the name still leads to n: have it look the
	// name up again for a stat too, not only for an open.
	lockorder.GoFuse("Inode.Parent")
	if name, parent := n.Parent(); parent != nil {
		n.fsys.notify.Entry(parent, name)
	}
	return syscall.ESTALE
}

// ident returns the backing identity n stands for.
func (n *Node) ident() (dev, ino uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dev, n.ino
}

// key is n's identity as the lock table knows it.
func (n *Node) key() locks.Key {
	dev, ino := n.ident()
	return locks.Key{Dev: dev, Ino: ino}
}

var (
	_ = (fs.NodeLookuper)((*Node)(nil))
	_ = (fs.NodeGetattrer)((*Node)(nil))
	_ = (fs.NodeSetattrer)((*Node)(nil))
	_ = (fs.NodeOnForgetter)((*Node)(nil))
	_ = (fs.NodeStatfser)((*Node)(nil))
	_ = (fs.NodeReadlinker)((*Node)(nil))
)

// newChild makes the node for a backing object just stat'ed in n, whose
// generation (dirfd.Statx) tells it apart from an earlier file that had the
// same inode number. go-fuse may answer with an existing node of the same
// identity (a hard link, or a second lookup racing this one); that node
// stands for the same object. An object whose number a live node borrows
// gets the number the mount made up for it (inodes.Table.MadeUp).
//
// The node the table leads to (inodes.Table.Node) is the object's while
// it still stands for it: it may have moved on to a later version.
func (n *Node) newChild(ctx context.Context, st *unix.Stat_t, gen uint64) *fs.Inode {
	f := n.fsys
	id := locks.FileID{Key: locks.KeyOf(st), Gen: gen}
	if m, _ := f.inos.Node(id); m != nil && m.key() == id.Key && !m.opens.Retired() {
		return m.EmbeddedInode()
	}
	child := &Node{fsys: f, dev: st.Dev, ino: st.Ino, gen: gen, recLocks: reclock.Place{Born: id.Key}}
	child.opens.HoldOff(time.Unix(0, f.inos.HoldOf(id.Key)))
	attr := fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: inodes.Number(f.rootDev, st.Dev, st.Ino), Gen: gen}
	var made *fs.Inode
	m, borrowed := f.inos.MadeUp(id, attr.Ino, func(ino uint64) (*Node, uint64) {
		attr.Ino = ino
		lockorder.GoFuse("Inode.NewInode") // under the inode table's lock (inodes.Table.MadeUp)
		made = n.NewInode(ctx, child, attr)
		return asNode(made), made.StableAttr().Ino
	})
	switch {
	case made != nil:
		return made
	case borrowed:
		return m.EmbeddedInode()
	}
	lockorder.GoFuse("Inode.NewInode")
	return n.NewInode(ctx, child, attr)
}

// asNode returns the realm node behind a go-fuse inode.
func asNode(in *fs.Inode) *Node {
	if in == nil {
		return nil
	}
	n, _ := in.Operations().(*Node)
	return n
}

// OnForget closes a directory's fd once go-fuse has dropped the node.
func (n *Node) OnForget() {
	if n.IsDir() && n != n.fsys.root {
		n.forgetDir()
	}
	n.fsys.heirs.Forget(&n.recLocks)
	n.fsys.inos.Forget(n, n.StableAttr().Ino)
}

// parentFd returns the fd of n's parent directory and n's name in it.
//
// A node with no parent was renamed over or removed since the kernel walked
// to it: ESTALE has the kernel look the name up again (open, stat and the
// other calls by path retry on it; a rename over the name leaves the name
// there, and natively such a call never misses it). The parent's fd is
// pinned until the caller calls done (always, also on error).
func (n *Node) parentFd(ctx context.Context) (pfd int, name string, pn *Node, done func(), errno syscall.Errno) {
	// A request of n's own reaches its file: an unpublished one is made
	// real first (unpublished.go). The caller holds no realm lock.
	if errno := n.fsys.contactNode(ctx, n); errno != 0 {
		return -1, "", nil, noUnpin, errno
	}
	lockorder.GoFuse("Inode.Parent")
	name, parent := n.Parent()
	pn = asNode(parent)
	if pn == nil {
		return -1, "", nil, noUnpin, syscall.ESTALE
	}
	pfd, done, errno = pn.dirFd(ctx)
	return pfd, name, pn, done, errno
}

// stillInside checks that directory n, whose open fd is fd, is still the
// root or beneath it (dirfd.Root.Where: one readlink), and returns where
// (rel, known: as dirfd.Root.Where says). The host may have moved it out
// of BACKING since its fd was opened: it is then gone for the mount,
// ESTALE as NFS answers for a directory gone on the server, audited
// PATH_ESCAPE. Not ENOENT: go-fuse turns that answer to a lookup into a
// negative entry the kernel keeps (negative_timeout), which would hide the
// name after the directory is moved back, when it is the mount's again.
func (n *Node) stillInside(ctx context.Context, fd int) (rel string, known bool, errno syscall.Errno) {
	if n == n.fsys.root {
		return "", true, 0
	}
	rel, known, inside, err := n.fsys.boundary.Where(fd)
	if err != nil {
		return "", false, dirfd.Errno(err)
	}
	if !inside {
		return "", false, n.fsys.gate.RefuseAs(ctx, "opendir", n, "", errcode.PathEscape, syscall.ESTALE, admit.RuleEscapeMovedOut)
	}
	return rel, known, 0
}

// verify checks that st is the object n stands for. A mismatch means the
// name now leads somewhere else, changed from outside the mount: it is never
// served under n. An object of another type (a symlink or directory where a
// file was) is a swap: refused, EACCES, audited PATH_ESCAPE, and the
// kernel's entry is queued for invalidation (fusefs/kernelnotify; never
// sent from here: a notification can block on the directory's lock, which
// the caller may hold). The same type is a replacement (an editor outside saving by
// rename): ESTALE, which makes the kernel look the name up afresh and retry,
// so the caller meets the new object through a full lookup instead of an
// error. A caller holding commitMu asks checkIdentity under it and
// answerIdentity after: the refusal names the path, which walks go-fuse's
// tree, and no go-fuse lock is taken under commitMu (internal/lockorder).
func (n *Node) verify(ctx context.Context, op string, pn *Node, name string, st *unix.Stat_t) syscall.Errno {
	return n.answerIdentity(ctx, op, pn, name, n.checkIdentity(ctx, pn, name, st))
}

// identity is what checkIdentity found under a node's name.
type identity int

const (
	identitySame     identity = iota // the node's object (or its committed successor)
	identityReplaced                 // another object of the node's type
	identitySwapped                  // an object of another type
)

// checkIdentity tells whether st is the object n stands for (verify).
func (n *Node) checkIdentity(ctx context.Context, pn *Node, name string, st *unix.Stat_t) identity {
	if dev, ino := n.ident(); st.Dev == dev && st.Ino == ino {
		return identitySame
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG && pn != nil && n.catchUp(ctx, pn, name, st) {
		return identitySame
	}
	if st.Mode&syscall.S_IFMT == n.Mode()&syscall.S_IFMT {
		return identityReplaced
	}
	return identitySwapped
}

// answerIdentity answers what checkIdentity found (verify), with no realm
// lock held that go-fuse's tree may not be walked under.
func (n *Node) answerIdentity(ctx context.Context, op string, pn *Node, name string, id identity) syscall.Errno {
	if id == identitySame {
		return 0
	}
	if pn != nil {
		n.fsys.notify.Entry(pn.EmbeddedInode(), name)
	}
	if id == identityReplaced {
		return syscall.ESTALE
	}
	return n.fsys.gate.Refuse(ctx, op, pn, name, errcode.PathEscape, admit.RuleEscapeSwapped)
}

// openPath opens n itself as an O_PATH fd and verifies it. The caller acts on
// the fd, so the object verified is the object changed.
func (n *Node) openPath(ctx context.Context, op string) (int, syscall.Errno) {
	if n.IsDir() {
		fd, done, errno := n.dirFd(ctx)
		defer done()
		if errno != 0 {
			return -1, errno
		}
		return dupErrno(fd)
	}
	var own int
	if errno, ok := n.fsys.ownUnpublished(ctx, n, func(fd int) (errno syscall.Errno) {
		own, errno = dupErrno(fd)
		return errno
	}); ok {
		return own, errno // its owner's file, unpublished: the temp
	}
	pfd, name, pn, done, errno := n.parentFd(ctx)
	defer done()
	if errno != 0 {
		return -1, errno
	}
	n.fsys.commitMu.RLock()
	fd, err := dirfd.OpenPath(pfd, name)
	var st unix.Stat_t
	if err == nil {
		if err = dirfd.Fstat(fd, &st); err != nil {
			dirfd.Close(fd)
		}
	}
	id := identitySame
	if err == nil {
		id = n.checkIdentity(ctx, pn, name, &st)
	}
	n.fsys.commitMu.RUnlock()
	if err != nil {
		return -1, dirfd.Errno(err)
	}
	if errno := n.answerIdentity(ctx, op, pn, name, id); errno != 0 {
		dirfd.Close(fd)
		return -1, errno
	}
	return fd, 0
}

// dupErrno duplicates fd.
func dupErrno(fd int) (int, syscall.Errno) {
	dup, err := dirfd.Dup(fd)
	return dup, dirfd.Errno(err)
}

// Lookup finds name in n: one statx on (n's fd, name), no symlink
// followed; a name that is a mount point is refused (PATH_ESCAPE).
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.enter()()
	if hiddenName(name) {
		return nil, syscall.ENOENT
	}
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, errno
	}
	pfd, done, errno := n.dirFd(ctx)
	defer done()
	if errno != 0 {
		return nil, errno
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if isEscape(err) {
		// A mount point: what is mounted there is not in BACKING.
		return nil, n.fsys.gate.Refuse(ctx, "lookup", n, name, errcode.PathEscape, admit.RuleEscapeMount)
	}
	if err != nil {
		return nil, dirfd.Errno(err)
	}
	if errno := n.fsys.gate.NoteLookup(ctx, n, name, &st, gen); errno != 0 {
		return nil, errno
	}
	child := n.newChild(ctx, &st, gen)
	cn := n.known(name, child)
	ttl := cn.attrValid()
	if cn.opens.InFlux() || n.fsys.writing(locks.KeyOf(&st)) {
		// The caller's owner's view, not cached (nodeopens). A name the
		// kernel has not met yet (another hard link) may lead to a node in
		// flux that known cannot find: the lock table tells.
		if w := n.fsys.ownWrite(ctx, locks.KeyOf(&st)); w != nil {
			dirfd.Fstat(w.Cur(), &st)
			w.Entry().Unlock()
		}
		ttl = 0
	}
	n.fsys.fillEntry(out, &st)
	out.Ino = child.StableAttr().Ino
	out.SetAttrTimeout(ttl)
	if !n.watched.Load() && n.fsys.watch != nil {
		// Changes in BACKING here are not reported: cache as briefly as
		// an unwatched mount does.
		out.SetEntryTimeout(DefaultCache.Entry)
		out.SetAttrTimeout(min(ttl, DefaultCache.Attr))
	}
	return child, 0
}

// stat stats the object n stands for, through fh when it shows the
// caller's view (views.go), else by name; a handle whose name is gone or
// leads elsewhere still answers for its file.
func (n *Node) stat(ctx context.Context, fh fs.FileHandle, st *unix.Stat_t) syscall.Errno {
	h := fileOf(fh)
	if h == nil {
		return n.statByName(ctx, st)
	}
	if !h.answersFor(ctx) {
		if errno := n.statByName(ctx, st); errno != syscall.ENOENT && errno != syscall.ESTALE {
			return errno
		}
	} else if rh, ok := h.(*readHandle); ok && n.writtenElsewhere(ctx, rh.owner) {
		return n.retire()
	}
	return h.withFd(func(fd int) syscall.Errno { return dirfd.Errno(dirfd.Fstat(fd, st)) })
}

// statByName stats the object n stands for by its name in its parent,
// verified, as the caller's owner sees it.
func (n *Node) statByName(ctx context.Context, st *unix.Stat_t) syscall.Errno {
	if n.IsDir() {
		fd, done, errno := n.dirFd(ctx)
		defer done()
		if errno != 0 {
			return errno
		}
		return dirfd.Errno(dirfd.Fstat(fd, st))
	}
	if errno, ok := n.fsys.ownUnpublished(ctx, n, func(fd int) syscall.Errno { return dirfd.Errno(dirfd.Fstat(fd, st)) }); ok {
		return errno // its owner's view, as its handle shows it
	}
	pfd, name, pn, done, errno := n.parentFd(ctx)
	defer done()
	if errno != 0 {
		return errno // ESTALE if n's name is gone; a handle answers for itself (stat)
	}
	n.fsys.commitMu.RLock()
	err := dirfd.Lstat(pfd, name, st)
	id := identitySame
	if err == nil {
		id = n.checkIdentity(ctx, pn, name, st)
	}
	n.fsys.commitMu.RUnlock()
	if err != nil {
		return dirfd.Errno(err)
	}
	if errno := n.answerIdentity(ctx, "stat", pn, name, id); errno != 0 {
		return errno
	}
	// A process stat-ing a file its owner is writing sees its own bytes,
	// as a reopen would.
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if w := n.fsys.ownWrite(ctx, locks.KeyOf(st)); w != nil {
			defer w.Entry().Unlock()
			return dirfd.Errno(dirfd.Fstat(w.Cur(), st))
		}
	}
	return 0
}

// Getattr stats the backing object.
func (n *Node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var st unix.Stat_t
	if errno := n.stat(ctx, fh, &st); errno != 0 {
		return errno
	}
	n.fsys.fillAttr(&out.Attr, &st, true)
	// The mount's inode number stays the one the kernel knows, even after an
	// atomic write has replaced the backing file.
	out.Ino = n.StableAttr().Ino
	out.SetTimeout(n.attrValid())
	return 0
}

// Setattr changes mode, owner, size and times, each through an fd of the
// verified object. A size change is a write: it goes to the owner's temp
// (see writeengine/commit.go), never to the file in place. Every change of a credential
// is refused (truncate's own check; prepareSelf judges the others): a chmod
// 666 of .env would give its bytes to every user of the host. stat is not a
// change and stays allowed (Getattr).
func (n *Node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f := n.fsys
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	h := fileOf(fh)
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(ctx, h, size); errno != 0 {
			return errno
		}
	}
	if in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID|fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		if errno, ok := f.setattrUnpublished(ctx, n, in); ok {
			return cmp.Or(errno, n.Getattr(ctx, fh, out))
		}
		fd, errno := n.prepareSelf(ctx, "setattr", true, true)
		if errno != 0 {
			return errno
		}
		defer dirfd.Close(fd)
		if mode, ok := in.GetMode(); ok {
			if errno := n.fsys.gate.DenyChmod(ctx, n, n.Mode()&syscall.S_IFMT, mode); errno != 0 {
				return errno
			}
		}
		if errno := n.fsys.gate.MetaHeldByOther(ctx, "setattr", n, fd); errno != 0 {
			return errno
		}
		op := journaling.SetattrOp(in.Valid&fuse.FATTR_MODE != 0, in.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0)
		c, errno := f.journal.Setattr(ctx, f.journal.Record(ctx, "", op, n.Rel("")), fd)
		if errno != 0 {
			return errno
		}
		err := f.guard.OwnChange([]int{fd}, func() error { return errOrNil(setattr.Apply(fd, in)) })
		var st unix.Stat_t
		var serr error
		if err == nil {
			serr = dirfd.Fstat(fd, &st)
		}
		f.journal.EndMeta(c, err, &st, serr == nil)
		if err = cmp.Or(err, serr); err != nil {
			return dirfd.Errno(err)
		}
		// When the caller's owner is writing the file, its temp becomes the
		// file at the next commit: it must carry the change too, and the
		// change is the owner's own, not a conflicting one from outside.
		// Without a handle, the answer is the object just changed, as
		// Getattr would find it again by name (verified, and as the
		// caller's owner sees it: its temp if it is writing the file),
		// without resolving the name a second time.
		view := st
		var w *pendingWrite
		if wh, ok := h.(*writeHandle); ok {
			w = wh.file.Pending()
			w.Entry().Lock()
		} else if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			w = n.fsys.ownWrite(ctx, locks.KeyOf(&st))
		}
		if w != nil {
			// The temp is new content: the engine gives the mode without
			// set-ID bits.
			m, chmod := in.GetMode()
			errno = w.Setattr(&st, func(temp int, mode uint32) syscall.Errno {
				tin := *in
				if chmod {
					tin.Mode = mode
				}
				return setattr.Apply(temp, &tin)
			}, m)
			if errno == 0 && h == nil {
				errno = dirfd.Errno(dirfd.Fstat(w.Cur(), &view))
			}
			w.Entry().Unlock()
			if errno != 0 {
				return errno
			}
		} else {
			n.ownChange(nil)
		}
		if h == nil {
			n.fsys.fillAttr(&out.Attr, &view, true)
			out.Ino = n.StableAttr().Ino
			out.SetTimeout(n.attrValid())
			return 0
		}
	}
	return n.Getattr(ctx, fh, out)
}

// truncate sets the size of a regular file atomically. Through a write
// handle (verified when it was opened) it changes the owner's temp,
// committed with the owner's writes, after asking whether a rename has put
// the file under a credential name since; a read handle changes nothing
// (EBADF). By name (truncate(2)) it opens the file as a write open does
// (verified, then judged, and the lock taken) and, unless the owner has
// the file open (whose close will commit), commits at once.
func (n *Node) truncate(ctx context.Context, h openFile, size uint64) syscall.Errno {
	if n.Mode()&syscall.S_IFMT != syscall.S_IFREG {
		return syscall.EINVAL
	}
	if h != nil {
		if errno := n.fsys.gate.DenySelf(ctx, "truncate", n, nil, true); errno != 0 {
			return errno
		}
		switch h := h.(type) {
		case *inPlaceHandle:
			return h.file.Truncate(size)
		case *writeHandle:
			return h.file.Truncate(ctx, size)
		}
		return syscall.EBADF
	}
	fh, _, errno := n.open(ctx, "truncate", syscall.O_WRONLY, false)
	if errno != 0 {
		return errno
	}
	if ip, ok := fileOf(fh).(*inPlaceHandle); ok {
		errno = ip.file.Truncate(size)
		ip.Release(ctx)
		return errno
	}
	t := fh.(*writeHandle) // a write open's handle is one, or in place
	errno = t.file.Truncate(ctx, size)
	if errno == 0 {
		// Unless the owner's open write handle commits at its close.
		errno = t.file.CommitTruncate(ctx)
	}
	t.Release(ctx)
	return errno
}

// Statfs reports on the backing filesystem.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st unix.Statfs_t
	if err := dirfd.Statfs(n.fsys.rootFd, &st); err != nil {
		return dirfd.Errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = st.Blocks, st.Bfree, st.Bavail
	out.Files, out.Ffree = st.Files, st.Ffree
	out.Bsize, out.Frsize = uint32(st.Bsize), uint32(st.Frsize)
	out.NameLen = uint32(st.Namelen)
	return 0
}

// Readlink returns a symlink's target if it stays beneath the root.
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	fd, errno := n.openPath(ctx, "readlink")
	if errno != 0 {
		return nil, errno
	}
	defer dirfd.Close(fd)
	target, err := dirfd.Readlink(fd)
	if err != nil {
		return nil, dirfd.Errno(err)
	}
	lockorder.GoFuse("Inode.Parent")
	_, parent := n.Parent()
	if errno := n.fsys.gate.DenyTarget(ctx, n, n.fsys.depth(asNode(parent)), target); errno != 0 {
		return nil, errno
	}
	return []byte(target), 0
}

// childInode is the node the kernel knows as name in directory n, if any.
// It takes a go-fuse lock: no realm lock but a leaf may be held (fs.go).
func (n *Node) childInode(name string) *fs.Inode {
	if n == nil {
		return nil
	}
	if hook := n.fsys.opts.beforeGoFuseLock; hook != nil {
		hook(n.fsys)
	}
	lockorder.GoFuse("Inode.GetChild")
	return n.GetChild(name)
}

// setIdent records the backing object n now stands for, and its
// generation (dirfd.Statx).
func (n *Node) setIdent(dev, ino, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dev, n.ino, n.gen = dev, ino, gen
}

// FileID is the backing file n stands for, generation included.
func (n *Node) FileID() locks.FileID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return locks.FileID{Key: locks.Key{Dev: n.dev, Ino: n.ino}, Gen: n.gen}
}

// Rel is the workspace-relative path of name in n (of n itself for ""),
// for audit lines and policy matching (admit.Place): n's place in
// go-fuse's tree. It is built in memory only and never passed to a system
// call.
func (n *Node) Rel(name string) string {
	p := ""
	if n != nil {
		lockorder.GoFuse("Inode.Path")
		p = n.Path(n.fsys.root.EmbeddedInode())
	}
	return admit.Join(p, name)
}

// catchUp moves n to found, the file the caller found named name in pn, if
// it is what commits of this mount put in place of the file n stands for
// (inodes.Table.CatchUp): a lookup made n for the old file while a commit
// renamed over it. A second look at the name gives the generation; it
// must still be found.
func (n *Node) catchUp(ctx context.Context, pn *Node, name string, found *unix.Stat_t) bool {
	pfd, done, errno := pn.dirFd(ctx)
	defer done()
	if errno != 0 {
		return false
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || locks.KeyOf(&st) != locks.KeyOf(found) {
		return false
	}
	now := locks.FileID{Key: locks.KeyOf(&st), Gen: gen}
	if !n.fsys.inos.CatchUp(n, n.StableAttr().Ino, n.FileID(), now) {
		return false
	}
	n.setIdent(now.Key.Dev, now.Key.Ino, now.Gen)
	return true
}

// writtenElsewhere reports whether the caller, lent a read handle of
// another owner (opener) for a stat by path, has uncommitted changes to
// n's file through another node. A node in flux that a lookup may no
// longer lead to (retired) keeps the owner's write, and the node the
// kernel met the name by since is not in flux: its readers, whose size
// the kernel keeps, cannot be told the owner's view. So n is retired too:
// the kernel looks the name up again and meets a node of its own, which
// answers the owner's view (Lookup).
func (n *Node) writtenElsewhere(ctx context.Context, opener locks.Owner) bool {
	if n.opens.InFlux() || !n.fsys.writing(n.key()) {
		return false
	}
	caller := n.fsys.owner(ctx)
	if caller == opener {
		return false // the handle's own owner: it answers for itself
	}
	w := n.fsys.engine.OwnWrite(caller, n.key())
	if w == nil {
		return false
	}
	uncommitted := w.Uncommitted()
	w.Entry().Unlock()
	return uncommitted
}

// known returns the node the kernel already has for child, which n's
// lookup of name just made: go-fuse keeps the node it knows under the same
// identity and drops the new one, whose counts are all zero.
func (n *Node) known(name string, child *fs.Inode) *Node {
	lockorder.GoFuse("Inode.GetChild")
	if old := n.GetChild(name); old != nil && old.StableAttr() == child.StableAttr() {
		return asNode(old)
	}
	return asNode(child)
}

// attrValid is how long the kernel may keep n's attributes
// (nodeopens.Set.AttrValid), and not at all while any owner holds the
// file's lock through another node: its appends in place grow the file
// under every node that stands for it, and only the writer's node hears of
// them (appendInPlace). Every answer that carries attributes sets it
// (go-fuse's default would replace a zero).
func (n *Node) attrValid() time.Duration {
	if n.fsys.writing(n.key()) {
		return 0
	}
	return n.opens.AttrValid(n.fsys.attrTimeout)
}
