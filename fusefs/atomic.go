package fusefs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"realm/errcode"
	"realm/fusefs/dirfd"
	"realm/locks"
)

// Atomic writes. Data written through the mount never lands in the file
// itself: the first write of an owner's handle copies the file into a
// hidden sibling temp (.realm-tmp-*, made with O_EXCL, reflinked where the
// filesystem can), and every handle that owner has on the file reads and
// writes that temp. A commit (on fsync(2), on the opener's last close, and
// on the last release: see File.Flush) fsyncs the temp, checks the file is
// still the object observed when the lock was taken, renames the temp over
// it and fsyncs the directory. The file is therefore always either its old
// or its new content, whatever fails or crashes in between.
//
// The lock table entry of (file, owner) holds the pendingWrite; the entry's
// lock guards it. The lock order is in the package doc (fs.go).

// Durability says when a commit is made durable.
type Durability int

const (
	// DurabilityFull fsyncs the temp before the rename and the directory
	// after it on every commit: after a power loss a file is its old or its
	// new content.
	DurabilityFull Durability = iota
	// DurabilityAtomic fsyncs only when the application calls fsync(2); a
	// close still commits by rename. A crash of realmfs or of any process
	// never leaves a torn file; after a power loss a file closed without
	// fsync may be its old content, or (on filesystems without ext4's
	// rename heuristics) empty.
	DurabilityAtomic
)

// Stage names a point of the commit where a test may inject a failure.
type Stage string

const (
	StageAfterWrite   Stage = "after-write"
	StageAfterFsync   Stage = "after-fsync"
	StageBeforeRename Stage = "before-rename"
)

// errInjected is the failure a FailAt hook injects.
var errInjected = errors.New("injected failure")

// pendingWrite is one owner's write in progress on one file. It knows the
// file by where it is (tdir, tname), not by node: the kernel may meet the
// file again under a new node after a commit, and a rename through the
// mount updates the place (see moved).
type pendingWrite struct {
	node     *Node         // the node that started it, for audit paths
	entry    *locks.Entry  // whose lock guards this
	tparent  *Node         // the file's directory node, for audit paths and its child node
	tdir     int           // O_PATH fd of the file's directory
	tname    string        // the file's name in it
	dir      int           // O_PATH fd of the directory the temp lives in
	base     int           // fd of the content last committed (or found at open)
	temp     int           // fd of the temp holding new content, -1 if none
	tempName string        // its name in dir
	mode     uint32        // the temp's permission bits
	observed unix.Stat_t   // the file as this owner last saw it commit
	dirty    bool          // temp holds changes not yet committed
	failed   syscall.Errno // a write into the temp failed: it must not be committed
	handles  int
}

// cur is the fd whose content the owner sees.
func (w *pendingWrite) cur() int {
	if w.temp >= 0 {
		return w.temp
	}
	return w.base
}

func (w *pendingWrite) close() {
	w.dropTemp()
	dirfd.Close(w.base)
	dirfd.Close(w.dir)
	dirfd.Close(w.tdir)
}

// dropTemp removes the temp and forgets its changes.
func (w *pendingWrite) dropTemp() {
	if w.temp >= 0 {
		dirfd.Close(w.temp)
		dirfd.Unlink(w.dir, w.tempName, 0)
		w.node.fsys.tempMade(w.tempName, false)
	}
	w.temp, w.tempName, w.dirty, w.failed = -1, "", false, 0
}

// ensureTemp makes the temp the owner writes into, seeded with the current
// content unless seed is false (O_TRUNC), for a change by a process of uid
// writer. A failure (ENOSPC, say) leaves nothing behind and the file
// untouched.
//
// A change of content drops privileges, as the kernel leaves to the daemon
// (HANDLE_KILLPRIV_V2, which spares a GETXATTR of security.capability per
// write): the temp never carries the file's capabilities, and a writer
// other than root clears set-user-ID, and set-group-ID where the group may
// execute (the kernel's should_remove_suid).
func (w *pendingWrite) ensureTemp(seed bool, writer uint32) error {
	if w.temp >= 0 {
		if writer != 0 && killSuid(w.mode) != w.mode {
			if err := dirfd.Chmod(w.temp, killSuid(w.mode)); err != nil {
				return err
			}
			w.mode = killSuid(w.mode)
		}
		return nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := TempPrefix + hex.EncodeToString(rnd[:])
	f := w.node.fsys
	f.tempMade(name, true)
	fd, err := dirfd.Open(w.dir, name, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		f.tempMade(name, false)
		return err
	}
	fail := func(err error) error {
		dirfd.Close(fd)
		dirfd.Unlink(w.dir, name, 0)
		f.tempMade(name, false)
		return err
	}
	// The temp becomes the file: give it the file's content (unless the
	// write truncates it, or it is empty, as every newly created file is),
	// owner, mode and extended attributes (as they are now, with this
	// mount's own changes) before anyone can see it under the file's name.
	// A change to the file after this fstat is caught by the commit, which
	// compares the file with what was observed when the lock was taken.
	var st unix.Stat_t
	if err := dirfd.Fstat(w.base, &st); err != nil {
		return fail(err)
	}
	if seed && st.Size > 0 {
		if err := dirfd.CloneOrCopy(fd, w.base, -1); err != nil {
			return fail(err)
		}
	}
	if f.asRoot {
		if err := dirfd.Chown(fd, int(st.Uid), int(st.Gid)); err != nil {
			return fail(err)
		}
	}
	mode := st.Mode & 07777
	if writer != 0 {
		mode = killSuid(mode)
	}
	if err := dirfd.Chmod(fd, mode); err != nil {
		return fail(err)
	}
	dirfd.CopyXattrs(fd, w.base, "security.capability")
	w.temp, w.tempName, w.mode = fd, name, mode
	return nil
}

// killSuid is mode without the bits a write by an unprivileged process
// clears: set-user-ID, and set-group-ID if the group may execute.
func killSuid(mode uint32) uint32 {
	mode &^= unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		mode &^= unix.S_ISGID
	}
	return mode
}

// sameFile reports whether the file is still the one observed: a process
// outside the mount that replaced or changed it makes this false.
func sameFile(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// commit makes the temp the file. durable forces the fsyncs whatever the
// mount's durability (an fsync(2) asked for them). It returns the errno for
// the caller and whether the file is new. The kernel's cached pages of the
// old content are not invalidated (see verify): readers of other owners
// read passthrough or direct, and a cached read handle opened later drops
// the pages at open (no FOPEN_KEEP_CACHE), as NFS's close-to-open does.
func (w *pendingWrite) commit(ctx context.Context, durable bool) (syscall.Errno, bool) {
	if !w.dirty {
		return 0, false
	}
	n, f := w.node, w.node.fsys
	fail := func(stage Stage, err error) (syscall.Errno, bool) {
		w.dropTemp()
		f.commitFailed(ctx, stage, w.place(), err)
		return syscall.EIO, false
	}
	if w.failed != 0 {
		// A write the caller was told failed (ENOSPC, say) left the temp
		// short: committing it would replace the file with a partial one.
		return fail(StageAfterWrite, w.failed)
	}
	durable = durable || f.opts.Durability == DurabilityFull
	if err := f.failAt(StageAfterWrite); err != nil {
		return fail(StageAfterWrite, err)
	}
	if durable {
		if err := unix.Fsync(w.temp); err != nil {
			return fail(StageAfterWrite, err)
		}
	}
	if err := f.failAt(StageAfterFsync); err != nil {
		return fail(StageAfterFsync, err)
	}
	pfd, name, pn := w.tdir, w.tname, w.tparent
	var now unix.Stat_t
	if err := dirfd.Lstat(pfd, name, &now); err != nil {
		if errors.Is(err, unix.ENOENT) {
			// Unlinked while open: as natively, the data goes with the file.
			w.dropTemp()
			return 0, false
		}
		return fail(StageBeforeRename, err)
	}
	if !sameFile(&now, &w.observed) {
		return w.conflict(ctx, pfd, pn, name, &now), false
	}
	if err := f.failAt(StageBeforeRename); err != nil {
		return fail(StageBeforeRename, err)
	}
	if now.Nlink > 1 {
		return w.commitInPlace(ctx, fail)
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(w.temp, "", &st)
	if err != nil {
		return fail(StageBeforeRename, err)
	}
	f.commitMu.Lock()
	if err := dirfd.Rename(w.dir, w.tempName, pfd, name, 0); err != nil {
		f.commitMu.Unlock()
		return fail(StageBeforeRename, err)
	}
	f.tempMade(w.tempName, false)
	// Every node that stood for the old file now stands for the new one:
	// the one that started the write, and the one the kernel has for the
	// name now (after an earlier commit it can be another). The node keeps
	// the inode number the kernel knows, which the backing filesystem may
	// now give to a new file: the number is marked borrowed.
	for _, m := range []*Node{n, asNode(pn.childInode(name))} {
		if m != nil && m.key() == keyOf(&w.observed) {
			m.setIdent(st.Dev, st.Ino)
			f.setMoved(movedID{keyOf(&st), gen}, m)
		}
	}
	f.commitMu.Unlock()
	var errno syscall.Errno
	if durable {
		// The new name is in place: a failure here cannot undo it, but the
		// caller must hear that durability was not reached.
		if err := dirfd.SyncDir(pfd); err != nil {
			errno = toErrno(err)
			f.logf("%s: committed, but the directory could not be synced: %v", w.place(), err)
		}
	}
	if err := f.writeLocks.Rekey(keyOf(&w.observed), keyOf(&st)); err != nil {
		f.logf("%s: committed; the lock table kept the old identity: %v", w.place(), err)
	}
	// Again: the rename changed its ctime. Should this fail, the next
	// commit sees a changed file and keeps its bytes as a conflict copy.
	if err := dirfd.Fstat(w.temp, &st); err != nil {
		f.logf("%s: committed; cannot stat the new file: %v", w.place(), err)
	}
	dirfd.Close(w.base)
	w.base, w.temp, w.tempName, w.dirty, w.observed = w.temp, -1, "", false, st
	return errno, true
}

// commitInPlace commits to a file with more than one hard link. Renaming
// the temp over one name would split the file: the other names would keep
// the old content. So the new content, complete and fsynced in the temp, is
// copied into the file itself and fsynced. This is the one commit a crash
// can tear (during the copy); every other stage still leaves the file as it
// was.
func (w *pendingWrite) commitInPlace(ctx context.Context, fail func(Stage, error) (syscall.Errno, bool)) (syscall.Errno, bool) {
	var tst unix.Stat_t
	if err := dirfd.Fstat(w.temp, &tst); err != nil {
		return fail(StageBeforeRename, err)
	}
	out, err := dirfd.Reopen(w.base, unix.O_WRONLY)
	if err != nil {
		return fail(StageBeforeRename, err)
	}
	defer dirfd.Close(out)
	if err := unix.Ftruncate(out, 0); err != nil {
		return fail(StageBeforeRename, err)
	}
	if err := dirfd.CloneOrCopy(out, w.temp, tst.Size); err != nil {
		return fail(StageBeforeRename, err)
	}
	if err := unix.Fsync(out); err != nil {
		return fail(StageBeforeRename, err)
	}
	w.dropTemp()
	if err := dirfd.Fstat(w.base, &w.observed); err != nil {
		w.node.fsys.logf("%s: committed in place; cannot stat it: %v", w.place(), err)
	}
	return 0, true
}

// conflict keeps the owner's new bytes as a visible copy beside a file that
// a process outside the mount changed since the lock was taken, and leaves
// the file as that process made it.
func (w *pendingWrite) conflict(ctx context.Context, pfd int, pn *Node, name string, now *unix.Stat_t) syscall.Errno {
	f := w.node.fsys
	copyName := fmt.Sprintf("%s.realm-conflict-%s", name, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := dirfd.Rename(w.dir, w.tempName, pfd, copyName, unix.RENAME_NOREPLACE); err != nil {
		f.logf("%s: changed from outside the mount while written; the new bytes are lost: cannot keep them as %s: %v", w.place(), copyName, err)
		w.dropTemp()
	} else {
		f.logf("%s: changed from outside the mount while written; the new bytes are kept as %s", w.place(), copyName)
		f.notify.entry(pn.EmbeddedInode(), copyName) // a name the kernel has not seen made
		dirfd.Close(w.temp)
		f.tempMade(w.tempName, false)
		w.temp, w.tempName, w.dirty = -1, "", false
	}
	if err := f.writeLocks.Rekey(keyOf(&w.observed), keyOf(now)); err != nil {
		f.logf("%s: the lock table kept the old identity: %v", w.place(), err)
	}
	w.observed = *now
	return f.refuse(ctx, "commit", pn, name, errcode.LockConflict)
}

// place is the workspace path of the file being written, for logs and audit
// lines.
func (w *pendingWrite) place() string { return w.node.fsys.relPath(w.tparent, w.tname) }

// commitFailed reports a commit that failed at stage: one audit line
// (WRITE_NOT_ATOMIC, with the cause) and one line in the daemon's log, since
// a commit at the last release has no caller to return its error to.
func (f *FS) commitFailed(ctx context.Context, stage Stage, rel string, err error) {
	if f.opts.Audit != nil {
		f.opts.Audit.RecordCause(ctx, "commit:"+string(stage), rel, errcode.WriteNotAtomic, syscall.EIO, err)
	}
	f.logf("%s: commit failed at %s: %v; the file is unchanged", rel, stage, err)
}

// abandon drops what the owner wrote when the process that opened the
// handle is being killed by a signal: a writer that dies half way leaves the
// file as it was. When another handle of the owner shares the temp, its
// bytes cannot be told apart, and nothing is dropped.
func (w *pendingWrite) abandon(sig int, tid uint32) {
	if w.handles != 1 || !w.dirty {
		return
	}
	w.node.fsys.logf("%s: not committed: its writer (thread %d) was killed by signal %d; the file keeps its old content", w.place(), tid, sig)
	w.dropTemp()
}

// setIdent records the backing object n now stands for.
func (n *Node) setIdent(dev, ino uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dev, n.ino = dev, ino
}

// failAt runs the test hook for a commit stage.
func (f *FS) failAt(s Stage) error {
	if f.opts.FailAt != nil && f.opts.FailAt(s) {
		return errInjected
	}
	return nil
}

// owner names the lock owner of the calling process.
func (f *FS) owner(ctx context.Context) locks.Owner {
	c := caller(ctx)
	if f.opts.Owners == nil {
		return locks.Owner(fmt.Sprintf("pid:%d", c.Pid))
	}
	o, err := f.opts.Owners.Owner(c.Pid)
	if err != nil {
		// The process is gone already: it can own nothing lasting.
		return locks.Owner(fmt.Sprintf("gone:%d", c.Pid))
	}
	return o
}

// acquireWait is how long a conflicting open waits for the holder's last
// release: the kernel sends RELEASE after close(2) has returned, so a
// sequential writer must not lose the race to it.
const acquireWait = 250 * time.Millisecond

// acquire takes the lock on n for owner, waiting briefly for a release that
// is on its way.
func (f *FS) acquire(ctx context.Context, key locks.Key, owner locks.Owner) (*locks.Lease, error) {
	deadline := time.Now().Add(acquireWait)
	for {
		lease, err := f.writeLocks.Acquire(key, owner)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return lease, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openShared opens n through the owner's pending write (starting one for a
// write open). base is the verified O_RDONLY fd of the file; it is consumed.
func (n *Node) openShared(ctx context.Context, owner locks.Owner, base int, pn *Node, pfd int, name string, st *unix.Stat_t, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	lease, err := f.acquire(ctx, locks.Key{Dev: st.Dev, Ino: st.Ino}, owner)
	if err != nil {
		dirfd.Close(base)
		return nil, 0, f.refuse(ctx, "open", n, "", errcode.LockConflict)
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	w, _ := e.Value.(*pendingWrite)
	if w == nil {
		dir, err1 := dirfd.Dup(pfd)
		tdir, err2 := dirfd.Dup(pfd)
		if err := errors.Join(err1, err2); err != nil {
			dirfd.Close(dir)
			dirfd.Close(tdir)
			dirfd.Close(base)
			lease.Release()
			return nil, 0, toErrno(err)
		}
		w = &pendingWrite{node: n, entry: e, tparent: pn, tdir: tdir, tname: name,
			dir: dir, base: base, temp: -1, observed: *st}
		e.Value = w
	} else if flags&syscall.O_CREAT != 0 {
		// A file this call just made has no write in progress: an entry
		// under its inode number belongs to a file that number was freed
		// from. Sharing it would send these bytes to that file's name.
		dirfd.Close(base)
		lease.Release()
		f.logf("%s: a stale write lock under the new file's inode number (ino %d); refused", f.relPath(pn, name), st.Ino)
		return nil, 0, syscall.EIO
	} else {
		dirfd.Close(base)
	}
	w.handles++
	if flags&syscall.O_TRUNC != 0 && writeFlags(flags) {
		w.dropTemp()
		if err := w.ensureTemp(false, caller(ctx).Uid); err != nil {
			w.release(e, lease)
			return nil, 0, toErrno(err)
		}
		w.dirty = true
	}
	fh := &File{node: n, fd: -1, lease: lease, shared: w, opener: f.processOf(caller(ctx).Pid)}
	n.cachedOpen.Add(1)
	// Direct I/O keeps this owner's uncommitted bytes out of the kernel's
	// page cache, which readers of other owners share.
	return fh, fuse.FOPEN_DIRECT_IO, 0
}

// release drops one handle; the caller holds e's lock. The last handle
// closes the temp and the lease.
//
// The lease goes first: the lock table keys the file by its inode number,
// which the backing filesystem may hand to a new file as soon as the last
// fd of this one closes. Closed first, a new file (a temp, a create) could
// meet this stale entry under its own number and share it.
func (w *pendingWrite) release(e *locks.Entry, lease *locks.Lease) {
	w.handles--
	last := w.handles <= 0
	if last {
		e.Value = nil
	}
	lease.Release()
	if last {
		w.close()
	}
}

// pendingFor returns the write in progress on the backing file with key,
// locked; the caller must unlock w.entry. nil if there is none.
func (f *FS) pendingFor(key locks.Key) *pendingWrite {
	e, ok := f.writeLocks.Entry(key)
	if !ok {
		return nil
	}
	e.Lock()
	w, _ := e.Value.(*pendingWrite)
	if w == nil {
		e.Unlock()
	}
	return w
}

// ownWrite returns, locked, the caller's own write in progress on the file
// with key; nil if there is none or it is another owner's. The caller must
// unlock w.entry.
func (f *FS) ownWrite(ctx context.Context, key locks.Key) *pendingWrite {
	holder, held := f.writeLocks.Holder(key)
	if !held || holder != f.owner(ctx) {
		return nil
	}
	w := f.pendingFor(key)
	if w != nil && w.entry.Owner() != holder {
		w.entry.Unlock()
		return nil
	}
	return w
}

// ownChange tells the write in progress on n's file, if any, that this
// mount itself just changed the file's metadata (chmod, link, an xattr):
// the new ctime is not a conflicting change from outside. apply, if not
// nil, makes the same change to the temp, which becomes the file.
func (n *Node) ownChange(apply func(temp int)) {
	w := n.fsys.pendingFor(n.key())
	if w == nil {
		return
	}
	defer w.entry.Unlock()
	if apply != nil && w.temp >= 0 {
		apply(w.temp)
	}
	w.refresh()
}

// moved tells the write in progress on the file with key that this mount
// renamed the file to name in the directory dir (fd dfd).
func (f *FS) moved(key locks.Key, dir *Node, dfd int, name string) {
	w := f.pendingFor(key)
	if w == nil {
		return
	}
	defer w.entry.Unlock()
	if fd, err := dirfd.Dup(dfd); err == nil {
		dirfd.Close(w.tdir)
		w.tdir, w.tname, w.tparent = fd, name, dir
	}
	w.refresh()
}

// refresh takes the file's new ctime as observed, if nothing else about it
// changed: the caller just changed it itself.
func (w *pendingWrite) refresh() {
	var st unix.Stat_t
	if dirfd.Lstat(w.tdir, w.tname, &st) == nil && st.Ino == w.observed.Ino && st.Size == w.observed.Size && st.Mtim == w.observed.Mtim {
		w.observed.Ctim = st.Ctim
	}
}

// heldByOther refuses op (a rename over name, an unlink of it) while
// another owner holds the lock of the file that name in dir is now. Like a
// conflicting open, it waits briefly for a release already on its way.
func (f *FS) heldByOther(ctx context.Context, op string, dir *Node, dfd int, name string) syscall.Errno {
	var st unix.Stat_t
	if dirfd.Lstat(dfd, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	key := keyOf(&st)
	holder, held := f.writeLocks.Holder(key)
	if !held {
		return 0
	}
	me := f.owner(ctx)
	for deadline := time.Now().Add(acquireWait); held && holder != me; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f.refuse(ctx, op, dir, name, errcode.LockConflict)
		}
		time.Sleep(5 * time.Millisecond)
		holder, held = f.writeLocks.Holder(key)
	}
	return 0
}

// fileKey is the lock-table key of the regular file name in dir, and whether
// anyone holds it.
func (f *FS) fileKey(dir int, name string) (locks.Key, bool) {
	var st unix.Stat_t
	if dirfd.Lstat(dir, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return locks.Key{}, false
	}
	key := locks.Key{Dev: st.Dev, Ino: st.Ino}
	_, held := f.writeLocks.Holder(key)
	return key, held
}

func keyOf(st *unix.Stat_t) locks.Key { return locks.Key{Dev: st.Dev, Ino: st.Ino} }

// childInode is the node the kernel knows as name in directory n, if any.
func (n *Node) childInode(name string) *fs.Inode {
	if n == nil {
		return nil
	}
	return n.GetChild(name)
}

// movedID names one backing file for the rekeyed map: its (dev, ino) and
// its generation, so that an inode number freed by a deleted file and given
// to a new one does not lead to the old file's node.
type movedID struct {
	key locks.Key
	gen uint64
}

// setMoved records that the file id is known to the kernel as node m, and
// that m's inode number, no longer its backing file's, is borrowed.
func (f *FS) setMoved(id movedID, m *Node) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.rekeyed == nil {
		f.rekeyed = make(map[movedID]*Node)
		f.borrowed = make(map[uint64]*Node)
	}
	f.rekeyed[id] = m
	f.borrowed[m.StableAttr().Ino] = m
}

// borrowedBit marks the inode numbers the mount makes up for files whose
// own number is borrowed by a live node; backing filesystems do not hand
// out numbers that high.
const borrowedBit = 1 << 63

// isBorrowed reports whether a live node answers to inode number ino
// without its backing file having it.
func (f *FS) isBorrowed(ino uint64) bool {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	return f.borrowed[ino] != nil
}

// movedNode returns the node an atomic write left the regular file id
// under, if that node still stands for it.
func (f *FS) movedNode(id movedID, mode uint32) *Node {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
	f.rekeyedMu.Lock()
	m := f.rekeyed[id]
	f.rekeyedMu.Unlock()
	if m != nil && m.key() != id.key {
		return nil // the node moved on to a later version
	}
	return m
}

// forgetMoved drops the entries of a node the kernel has forgotten.
func (f *FS) forgetMoved(m *Node) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	for k, v := range f.rekeyed {
		if v == m {
			delete(f.rekeyed, k)
		}
	}
	if f.borrowed[m.StableAttr().Ino] == m {
		delete(f.borrowed, m.StableAttr().Ino)
	}
}

// retired records that node m, standing for the backing file key, takes no
// new opens: lookups must not lead to it again. Its inode number becomes
// borrowed, so the node made for the file next gets a number of its own
// (two kernel inodes with one number would look like hard links to cp and
// tar), and that node's readers hold off passthrough for retireHold.
func (f *FS) retired(m *Node, key locks.Key) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.rekeyed == nil {
		f.rekeyed = make(map[movedID]*Node)
		f.borrowed = make(map[uint64]*Node)
	}
	for k, v := range f.rekeyed {
		if v == m {
			delete(f.rekeyed, k)
		}
	}
	f.borrowed[m.StableAttr().Ino] = m
	now := time.Now()
	if f.holds == nil {
		f.holds = make(map[locks.Key]int64)
	}
	for k, until := range f.holds {
		if until < now.UnixNano() {
			delete(f.holds, k)
		}
	}
	f.holds[key] = now.Add(retireHold).UnixNano()
}

// holdOf is when a new node for the backing file key may let readers pass
// through (see retired); 0 for most files.
func (f *FS) holdOf(key locks.Key) int64 {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	return f.holds[key]
}

// tempMade records that this mount made (or no longer has) the temp name.
func (f *FS) tempMade(name string, live bool) {
	f.tempsMu.Lock()
	defer f.tempsMu.Unlock()
	if !live {
		delete(f.temps, name)
		return
	}
	if f.temps == nil {
		f.temps = make(map[string]bool)
	}
	f.temps[name] = true
}

// isOwnTemp reports whether name is a temp this mount is using.
func (f *FS) isOwnTemp(name string) bool {
	f.tempsMu.Lock()
	defer f.tempsMu.Unlock()
	return f.temps[name]
}

// processOf is the process (thread group id) of the calling thread pid, read
// from /proc/PID/status when the handle is opened (an open(2) holds no lock
// that reading it would need); the thread itself if that fails.
func (f *FS) processOf(pid uint32) uint32 {
	o, err := f.processes.Owner(pid)
	if err != nil {
		return pid
	}
	tgid, err := strconv.ParseUint(strings.TrimPrefix(string(o), "pid:"), 10, 32)
	if err != nil {
		return pid
	}
	return uint32(tgid)
}
