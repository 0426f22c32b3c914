package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journaling"
	"github.com/realm-dev/realm/locks"
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
	if errno := n.fsys.gate.AdmitEntry(ctx, op, n, name, use); errno != 0 {
		return -1, "", noUnpin, errno
	}
	pfd, dir, known, done, errno := n.dirFdWhere(ctx)
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

// prepareDir is prepare up to the name's judgement: read-only mount, hidden
// name (guard.AdmitEntry), n's verified fd (pinned until done). Rename
// judges its names itself, under nsMu (renameUnder).
func (n *Node) prepareDir(ctx context.Context, op, name string, use guard.Use) (int, func(), syscall.Errno) {
	if errno := n.fsys.gate.AdmitEntry(ctx, op, n, name, use); errno != 0 {
		return -1, noUnpin, errno
	}
	return n.dirFd(ctx)
}

// createNamed finishes making a directory, fifo, socket or symlink by name
// in n, whose fd pfd prepare returned: make is called with a mode with no
// permission bits (guard.FirstMode), so that the object can be recognised
// as the one this call made (guard.MadeByCall) before it is given to the
// caller and its mode is set. Without ownership to hand over, make gets
// the final mode and no check is needed. The final mode is the caller's
// mode as the kernel would make it natively (admit.Gate.NewMode: its umask,
// or the directory's default ACL); a symlink's is always 0777.
//
// rel is the new name's workspace path (prepare).
func (n *Node) createNamed(ctx context.Context, op string, pfd int, rel, name string, mode uint32, make func(mode uint32) error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fsys.takeInode(ctx, op, rel); errno != 0 {
		return nil, errno
	}
	isLink := mode&syscall.S_IFMT == syscall.S_IFLNK
	if !isLink {
		typ := mode & syscall.S_IFMT
		mode = typ | n.fsys.gate.NewMode(ctx, op, n, pfd, name, typ, mode)
	}
	handOver := n.fsys.gate.HandsOver(ctx)
	c, errno := n.fsys.journal.Begin(ctx, op, rel, n.fsys.journalRecord(ctx, "", journaling.NamedOps[op], rel), journal.NoKeep)
	if errno != 0 {
		return nil, errno
	}
	err := make(guard.FirstMode(mode, handOver))
	var made *journal.ID
	if err == nil {
		made = journaling.IDAt(pfd, name)
	}
	n.fsys.journal.End(c, err, made)
	if err != nil {
		return nil, dirfd.Errno(err)
	}
	fd, err := dirfd.OpenPath(pfd, name)
	if err != nil {
		return nil, dirfd.Errno(err)
	}
	defer dirfd.Close(fd)
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, dirfd.Errno(err)
	}
	inherited, ok := guard.MadeByCall(&st, mode, handOver, uint32(unix.Geteuid()))
	if !ok {
		// Not what this call made: something outside swapped it in.
		return nil, n.fsys.gate.Refuse(ctx, op, n, name, errcode.PathEscape, admit.RuleEscapeSwapped)
	}
	if handOver {
		if errno := n.fsys.gate.Claim(ctx, pfd, fd); errno != 0 {
			dirfd.Unlink(pfd, name, unlinkFlags(mode))
			return nil, errno
		}
		if !isLink {
			if err := dirfd.Chmod(fd, mode&07777|inherited); err != nil {
				dirfd.Unlink(pfd, name, unlinkFlags(mode))
				return nil, dirfd.Errno(err)
			}
		}
	}
	gen, errno := statNew(fd, &st)
	if errno != 0 {
		return nil, errno
	}
	n.fsys.guard.MadeNew(rel, &st, gen)
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
	in, linked, errno := n.link(ctx, target, name, out)
	if linked != nil {
		// Not under nsMu either: a write's entry lock is taken above it
		// (a commit holds its entry into nsMu).
		linked.ownChange(nil)
	}
	return in, errno
}

// link is Link's step under nsMu: the checks and the link. linked is the
// node linked, once the link is made.
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
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, nil, dirfd.Errno(err)
	}
	// Another name of a protected file would be one to write it by.
	if errno := n.fsys.gate.DenySelf(ctx, "link", tn, &st, true); errno != 0 {
		return nil, nil, errno
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		// The link's target resolves from its new directory too.
		if errno := n.fsys.gate.DenyLinkTarget(ctx, "link", n, name, fd, guard.PathDepth(dir)); errno != 0 {
			return nil, nil, errno
		}
	}
	rec := n.fsys.journalRecord(ctx, "", journal.OpLink, tn.Rel(""))
	rec.To, rec.Before = admit.Join(dir, name), journal.ObjectOf(&st)
	c, errno := n.fsys.journal.Begin(ctx, "link", rec.To, rec, journal.NoKeep)
	if errno != 0 {
		return nil, nil, errno
	}
	err := n.fsys.guard.OwnChange([]int{fd}, func() error { return dirfd.Link(fd, pfd, name) })
	n.fsys.journal.End(c, err, nil)
	if err != nil {
		return nil, nil, dirfd.Errno(err)
	}
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, tn, dirfd.Errno(err)
	}
	// A file the mount may read, linked onto a credential name, holds what
	// the caller could read already: made through the mount.
	n.fsys.guard.MadeNew(admit.Join(dir, name), &st, tn.FileID().Gen)
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

// remove is Unlink and Rmdir: one unlinkat on n's verified fd.
func (n *Node) remove(ctx context.Context, op, name string, flags int) syscall.Errno {
	defer n.enter()()
	pfd, _, done, errno := n.prepare(ctx, op, name, guard.Removes)
	defer done()
	if errno != 0 {
		return errno
	}
	// Removing a file another owner is writing would drop that owner's
	// bytes at its commit: refused like renaming over it.
	var l guard.FileLock
	if flags == 0 {
		l = n.fsys.gate.Names.LockOf(pfd, name)
		if errno := n.fsys.gate.HeldByOther(ctx, "unlink", n, name, l); errno != 0 {
			return errno
		}
	}
	// A journal's record names the name's place now, held still by nsMu
	// (shared) through the removal.
	unlock, rel := func() {}, ""
	if n.fsys.journal.On() {
		unlock = n.fsys.nsLock(false)
		rel = admit.Join(n.fsys.gate.DirRel(n, pfd), name)
	}
	if flags == 0 {
		if errno := n.keepCredential(pfd, name, rel); errno != 0 {
			unlock()
			return errno
		}
	}
	// Another name of a made file may stay: its ctime moves.
	mfd := n.fsys.guard.MadeFd(pfd, name)
	defer dirfd.Close(mfd)
	rec := n.fsys.journalRecord(ctx, "", "", rel)
	err := n.fsys.guard.OwnChange([]int{mfd}, func() error { return n.fsys.journal.Remove(rec, pfd, name, flags) })
	if errors.Is(err, syscall.ENOTEMPTY) && n.fsys.gate.SweepBeforeRmdir(pfd, name) {
		err = n.fsys.journal.Remove(rec, pfd, name, flags)
	}
	unlock()
	if err != nil {
		return n.fsys.journal.RemoveErrno(ctx, op, n.Rel(name), err)
	}
	if l.Held {
		n.fsys.engine.Removed(l.Key, pfd, name) // the owner's own write goes with the file
	}
	return 0
}

// keepCredential saves the identity of a credential whose name (name in
// pfd; rel its workspace path, "" if not known yet) is about to be
// removed while another link to it stays: the scan of the next mount
// finds a credential by its name, and would not know the other link for
// one (guard.Guard.SaveStore). Written before the removal; a store that
// cannot be written refuses it (EIO): losing the identity would give the
// key out at the next mount.
func (n *Node) keepCredential(pfd int, name, rel string) syscall.Errno {
	f := n.fsys
	if !f.guard.On() || f.opts.MadeStore == "" {
		return 0
	}
	if rel == "" {
		rel = admit.Join(f.gate.DirRel(n, pfd), name)
	}
	if !f.guard.Denied(rel) {
		return 0
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink < 2 {
		return 0
	}
	f.guard.Creds.Add(guard.ID{Key: locks.KeyOf(&st), Gen: gen})
	if err := f.guard.SaveStore(f.opts.MadeStore, f.backing); err != nil {
		f.logf("the identity of credential %s cannot be saved, so its removal is refused: %v", rel, err)
		return syscall.EIO
	}
	return 0
}

// Rename is one renameat2 between two verified directory fds; flags
// (RENAME_NOREPLACE, RENAME_EXCHANGE) pass through. Each name's directory
// is prepared (prepareDir: the source, then the target), then
// RENAME_WHITEOUT is refused (PATH_ESCAPE: it would leave a 0:0 character
// device at the source name, a device node Mknod refuses), then a file
// another owner is writing (a wait of the lock table: before nsMu), then,
// under nsMu, the names judged once at their places now
// (admit.Gate.JudgeRename: a credential, a protected target), a directory
// holding a credential or whose contents would be protected at its new
// name, a symlink that would climb out of the root from its new place (the
// object, or a link beneath a directory moved shallower:
// admit.Gate.DenyLinkMove), and the rename itself.
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
	ofd, doneOld, errno := n.prepareDir(ctx, "rename", name, guard.MovesFrom)
	defer doneOld()
	if errno != 0 {
		return errno
	}
	nfd, doneNew, errno := np.prepareDir(ctx, "rename", newName, guard.RenameTarget(exchange))
	defer doneNew()
	if errno != 0 {
		return errno
	}
	if flags&unix.RENAME_WHITEOUT != 0 {
		return f.gate.Refuse(ctx, "rename", n, name, errcode.PathEscape, admit.RuleEscapeWhiteout)
	}

	names := f.gate.Names
	src, dst := names.LockOf(ofd, name), names.LockOf(nfd, newName)
	if errno := f.gate.HeldByOther(ctx, "rename", np, newName, dst); errno != 0 {
		return errno
	}
	if exchange {
		if errno := f.gate.HeldByOther(ctx, "rename", n, name, src); errno != 0 {
			return errno
		}
	}
	// The files moved are marked from the look that finds their writes
	// until the writes have followed: no commit of theirs meets a name
	// half way (guard.NameLocks.BeginMove).
	ls, endMove := names.BeginMove(f.engine.BeginMoves, guard.Place{Dir: ofd, Name: name}, guard.Place{Dir: nfd, Name: newName})
	defer endMove()
	replaced := dst.Held // by the caller's owner: another's was refused
	src, dst = ls[0], ls[1]
	r := renaming{from: n, to: np, ofd: ofd, nfd: nfd, name: name, newName: newName, flags: flags, me: f.owner(ctx)}
	if errno := f.renameJudged(ctx, &r); errno != 0 {
		return errno
	}
	f.guard.MadeRenamed(nfd, r.newRel, newName)
	if exchange {
		f.guard.MadeRenamed(ofd, r.oldRel, name)
	}
	// A write in progress follows its file to the new name, one begun
	// since the look too (renamed finds none if there is none).
	if src.Regular() {
		f.engine.Renamed(src.Key, np, nfd, newName)
	}
	if exchange && dst.Regular() {
		f.engine.Renamed(dst.Key, n, ofd, name)
	}
	if replaced && !exchange && dst.Key != src.Key {
		// The caller's owner's own write of the file replaced (another's
		// was refused) goes with that file, as natively.
		f.engine.Removed(dst.Key, nfd, newName)
	}
	return 0
}

// renaming is one rename's names, and their workspace paths as the rename
// found them (renameUnder).
type renaming struct {
	from, to       *Node
	ofd, nfd       int
	name, newName  string
	flags          uint32
	oldRel, newRel string
	me             locks.Owner // the caller's owner
}

// renameJudged judges r's names and moves under nsMu, and renames: shared
// for names that are no directory, exclusive when a directory's contents
// are scanned (admit.Gate.DenyDirRename; guard.RenameScans), so that no
// name enters it between the scan and the rename. A name found to be a
// directory only under the shared lock (it became one since) is judged
// again under the exclusive one.
func (f *FS) renameJudged(ctx context.Context, r *renaming) syscall.Errno {
	exclusive := guard.RenameScans(r.names())
	for {
		unlock := f.nsLock(exclusive)
		errno, again := f.renameUnder(ctx, r, exclusive)
		unlock()
		if !again {
			return errno
		}
		exclusive = true
	}
}

// names is r's names as the guard judges them.
func (r *renaming) names() guard.RenameNames {
	return guard.RenameNames{
		OldDir: r.ofd, NewDir: r.nfd,
		Name: r.name, NewName: r.newName,
		OldRel: r.oldRel, NewRel: r.newRel,
		Exchange: r.flags&unix.RENAME_EXCHANGE != 0,
	}
}

// renameUnder is renameJudged's step under nsMu: the names at their
// places now (admit.Gate.DirRel), judged (guard.Guard.JudgeRename: both
// names of an exchange against the protect rule, then each name's own
// checks), each directory moved (admit.Gate.DenyDirRename, exclusive only:
// again is true when one is met under the shared lock), then renameat2.
func (f *FS) renameUnder(ctx context.Context, r *renaming, exclusive bool) (errno syscall.Errno, again bool) {
	exchange := r.flags&unix.RENAME_EXCHANGE != 0
	r.oldRel = admit.Join(f.gate.DirRel(r.from, r.ofd), r.name)
	r.newRel = admit.Join(f.gate.DirRel(r.to, r.nfd), r.newName)
	if errno := f.gate.JudgeRename(ctx, r.names()); errno != 0 {
		return errno, false
	}
	if errno, again := f.gate.DenyDirRename(ctx, r.from, r.ofd, r.name, r.oldRel, r.newRel, exclusive); errno != 0 || again {
		return errno, again
	}
	if exchange {
		if errno, again := f.gate.DenyDirRename(ctx, r.to, r.nfd, r.newName, r.newRel, r.oldRel, exclusive); errno != 0 || again {
			return errno, again
		}
	}
	if errno, again := f.gate.DenyLinkMove(ctx, r.from, r.ofd, r.name, r.oldRel, r.newRel, exclusive); errno != 0 || again {
		return errno, again
	}
	if exchange {
		if errno, again := f.gate.DenyLinkMove(ctx, r.to, r.nfd, r.newName, r.newRel, r.oldRel, exclusive); errno != 0 || again {
			return errno, again
		}
	}
	// The file renamed, and a file replaced or exchanged that keeps
	// another name: the rename moves their ctimes.
	sfd, dfd := f.guard.MadeFd(r.ofd, r.name), f.guard.MadeFd(r.nfd, r.newName)
	defer dirfd.Close(sfd)
	defer dirfd.Close(dfd)
	// The last look at who writes what the rename replaces and the rename
	// are one step against a write open's look and lock (commitMu): a file
	// another owner opened for writing since admit.Gate.HeldByOther is not
	// renamed over, where its commit would meet another file.
	f.commitMu.Lock()
	if held, other := f.gate.Names.ReplacesOthers(r.names(), r.me); other {
		f.commitMu.Unlock()
		return f.gate.RefuseHeld(ctx, "rename", r.to, r.newName, held.Key, held.Holder), false
	}
	// The journal's intent, the file replaced kept by link: under
	// commitMu, after the last look at who writes it, so that no write
	// open meets the link's change of its ctime and nlink (a write opened
	// between the two would take it for a change from outside).
	rec := f.journalRecord(ctx, r.me, journal.OpRename, r.oldRel)
	rec.To = r.newRel
	c, errno := f.journal.Rename(ctx, rec, r.ofd, r.name, r.nfd, r.newName, r.flags&unix.RENAME_EXCHANGE != 0)
	if errno != 0 {
		f.commitMu.Unlock()
		return errno, false
	}
	err := f.guard.OwnChange([]int{sfd, dfd}, func() error {
		return dirfd.Rename(r.ofd, r.name, r.nfd, r.newName, uint(r.flags))
	})
	f.commitMu.Unlock()
	f.journal.End(c, err, nil)
	return dirfd.Errno(err), false
}
