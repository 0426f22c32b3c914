package fusefs

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// The write in progress: how handles meet an owner's pendingWrite through
// the lock table, and how the mount's own changes to a file reach it.

// How long a conflicting open (or rename, unlink, metadata change) waits
// for another owner's release. The kernel sends RELEASE after close(2)
// has returned, so a sequential writer's next step would meet the lock
// its last one let go of. A hold whose opener closed its last descriptor
// is closing (writeproto), and a conflicting call waits for it to be
// released, woken by the release (locks.AcquireWait), up to releaseWait:
// a bound for a hold whose RELEASE does not come (one the daemon took for
// closed while a descriptor of it lives on: a forked child's, or a dup
// beside an idle write handle), never reached by load. A hold not known
// to be closing is waited for only releaseGrace (a close the daemon
// could not judge, by another process than the opener), then EBUSY.
const (
	releaseWait  = 2 * time.Second
	releaseGrace = 250 * time.Millisecond
)

// patience is the wait of a conflicting call that starts now.
func patience() locks.Patience {
	now := time.Now()
	return locks.Patience{Closing: now.Add(releaseWait), Grace: now.Add(releaseGrace)}
}

// lockMode is the lock an open with flags takes: an append without
// O_TRUNC shares the file with other owners' appends (they go into the
// file in place, each whole); every other write excludes other owners.
func lockMode(flags uint32) locks.Mode {
	if flags&syscall.O_APPEND != 0 && flags&syscall.O_TRUNC == 0 {
		return locks.Append
	}
	return locks.Write
}

// acquire takes the lock on n for owner in mode, waiting for a release
// that is on its way (releaseWait).
func (f *FS) acquire(ctx context.Context, key locks.Key, owner locks.Owner, mode locks.Mode) (*locks.Lease, error) {
	return f.writeLocks.AcquireWait(ctx, key, owner, mode, patience())
}

// openShared opens n through the owner's pending write (starting one for a
// write open). base is the verified O_RDONLY fd of the file, named name in
// the directory pn (fd pfd); it is consumed, and so is lease, the owner's
// lock on the file if the caller took it (nil: openShared takes it). again:
// a commit replaced the file since base was opened, and no write of the
// owner's is left to join; the caller opens the name again.
func (n *Node) openShared(ctx context.Context, owner locks.Owner, lease *locks.Lease, base int, pn *Node, pfd int, name string, st *unix.Stat_t, flags uint32, forKernel bool) (fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno, again bool) {
	f := n.fsys
	if !n.admitShared(forKernel) {
		dirfd.Close(base)
		lease.Release()
		// Its readers stay on n: the attributes the kernel keeps for them
		// go, as the writer's appends in place may grow the file.
		f.notify.inode(n.EmbeddedInode())
		return nil, 0, n.retire(), false
	}
	defer func() {
		if errno != 0 || again {
			n.sharedGone()
		}
	}()
	if lease == nil {
		var err error
		// A reader of the owner's write takes the weakest hold.
		mode := locks.Append
		if writeFlags(flags) {
			mode = lockMode(flags)
		}
		if lease, err = f.acquire(ctx, keyOf(st), owner, mode); err != nil {
			dirfd.Close(base)
			return nil, 0, f.refuse(ctx, "open", n, "", errcode.LockConflict, RuleLockOtherOwner), false
		}
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	w, _ := e.Value.(*pendingWrite)
	if w == nil && lease.Key() != keyOf(st) {
		// The owner's commit moved the lock to the file it put in place,
		// and its write ended: base is the file that commit replaced.
		dirfd.Close(base)
		lease.Release()
		return nil, 0, 0, true
	}
	if w == nil {
		var err error
		if w, err = n.startWrite(e, owner, base, pn, pfd, name); err != nil {
			dirfd.Close(base)
			lease.Release()
			if errors.Is(err, errMoved) {
				return nil, 0, 0, true
			}
			return nil, 0, toErrno(err), false
		}
	} else if flags&syscall.O_CREAT != 0 {
		// A file this call just made has no write in progress: an entry
		// under its inode number belongs to a file that number was freed
		// from. Sharing it would send these bytes to that file's name.
		dirfd.Close(base)
		lease.Release()
		f.logf("%s: a stale write lock under the new file's inode number (ino %d); refused", f.relPath(pn, name), st.Ino)
		return nil, 0, syscall.EIO, false
	} else {
		dirfd.Close(base)
	}
	// Empty as the owner sees it, before any truncation: nothing old to tear.
	var cur unix.Stat_t
	fresh := dirfd.Fstat(w.cur(), &cur) == nil && cur.Size == 0
	opener := f.processOf(caller(ctx).Pid)
	wh := w.m.Open(writeproto.Open{Write: writeFlags(flags), Append: flags&syscall.O_APPEND != 0,
		Truncate: flags&syscall.O_TRUNC != 0, Fresh: fresh,
		Opener: opener, Kind: flags & sameOpenMask, Hold: lease})
	if wh.Truncates() {
		// Truncating is a change: the opener writes from here on.
		w.dropTemp()
		if err := w.ensureTemp(false); err != nil {
			w.release(ctx, e, lease, wh)
			return nil, 0, toErrno(err), false
		}
		w.m.Truncated(wh)
	}
	h := &writeHandle{handle: handle{node: n}, lease: lease, pending: w, wh: wh, opener: opener}
	h.flags.Store(flags)
	fh = h
	w.handleOn(n, +1)
	// Direct I/O keeps this owner's uncommitted bytes out of the kernel's
	// page cache, which readers of other owners share.
	return fh, fuse.FOPEN_DIRECT_IO, 0, false
}

// startWrite begins owner's write in progress on the file held by base
// (named name in the directory pn, fd pfd), on e, whose lock the caller
// holds; base is the write's from here on. errMoved: the name leads to
// base no more (a rename through the mount moved the file between the
// open's look and now, and the writes it made follow found none yet to
// move): the caller opens the file again by the name it has now.
//
// The write observes the file as it is now, under e's lock, not as the
// open found it: the owner's own last write of the file may have changed
// it since (an append in place, which took the same lock) and ended. Its
// change, taken for one behind the mount, made a rewrite's commit keep a
// conflict copy and fail with EBUSY (issue 29, defect 6). Under the lock
// every change of the owner's is before the observation or known to the
// write; another owner's append can come before it too, and natively
// comes before this write as well.
func (n *Node) startWrite(e *locks.Entry, owner locks.Owner, base int, pn *Node, pfd int, name string) (*pendingWrite, error) {
	f := n.fsys
	var st, at unix.Stat_t
	if err := dirfd.Fstat(base, &st); err != nil {
		return nil, err
	}
	if err := dirfd.Lstat(pfd, name, &at); err != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		return nil, errMoved
	}
	tempDir, err1 := dirfd.Dup(pfd)
	fileDir, err2 := dirfd.Dup(pfd)
	if err := errors.Join(err1, err2); err != nil {
		dirfd.Close(tempDir)
		dirfd.Close(fileDir)
		return nil, err
	}
	w := &pendingWrite{node: n, entry: e, fileParent: pn, fileDir: fileDir, fileName: name,
		tempDir: tempDir, base: base, temp: -1, appendFd: -1, observed: st, seq: f.writeSeq.Add(1)}
	e.Value = w
	if f.fds.bounded() { // admitted with the open (openNeed)
		w.chargedTo = owner
		f.fds.charge(owner, pendingFds)
	}
	return w, nil
}

// errMoved: the file a write open found is at its name no more.
var errMoved = errors.New("the file moved since the open found it")

// release drops handle h (ctx: the request that does); the caller holds
// e's lock. The last handle closes the temp and the lease.
//
// The lease goes first: the lock table keys the file by its inode number,
// which the backing filesystem may hand to a new file as soon as the last
// fd of this one closes. Closed first, a new file (a temp, a create) could
// meet this stale entry under its own number and share it.
func (w *pendingWrite) release(ctx context.Context, e *locks.Entry, lease *locks.Lease, h *writeproto.Handle) {
	last := w.m.Released(h)
	if last {
		e.Value = nil
	}
	lease.Release()
	if last {
		w.close(ctx)
		w.protocolEnded()
	}
}

// pendingOf returns e's write in progress, locked; the caller must unlock
// e. nil (e unlocked) if there is none.
func pendingOf(e *locks.Entry) *pendingWrite {
	e.Lock()
	w, _ := e.Value.(*pendingWrite)
	if w == nil {
		e.Unlock()
	}
	return w
}

// eachPending runs fn on every owner's write in progress on the backing
// file with key (several owners may append to it), each under its entry's
// lock, one at a time.
func (f *FS) eachPending(key locks.Key, fn func(w *pendingWrite)) {
	for _, e := range f.writeLocks.Entries(key) {
		if w := pendingOf(e); w != nil {
			fn(w)
			e.Unlock()
		}
	}
}

// ownWrite returns, locked, the caller's own write in progress on the file
// with key; nil if there is none. The caller must unlock w.entry.
func (f *FS) ownWrite(ctx context.Context, key locks.Key) *pendingWrite {
	return f.ownWriteOf(f.owner(ctx), key)
}

// ownWriteOf is ownWrite for the owner o.
func (f *FS) ownWriteOf(o locks.Owner, key locks.Key) *pendingWrite {
	e, ok := f.writeLocks.EntryOf(key, o)
	if !ok {
		return nil
	}
	return pendingOf(e)
}

// ownChange tells the write in progress on n's file, if any, that this
// mount itself just changed the file's metadata (chmod, link, an xattr):
// the new ctime is not a conflicting change from outside. apply, if not
// nil, makes the same change to the temp, which becomes the file; one it
// cannot make is told at the commit (pendingWrite.xattrsLost).
func (n *Node) ownChange(apply func(temp int) error) {
	n.fsys.eachPending(n.key(), func(w *pendingWrite) {
		if apply != nil && w.temp >= 0 {
			if err := apply(w.temp); err != nil {
				w.xattrsLost = errors.Join(w.xattrsLost, err)
			}
		}
		w.refresh()
	})
}

// refresh takes the file's new ctime as observed, if nothing else about it
// changed: the caller just changed it itself.
func (w *pendingWrite) refresh() {
	var st unix.Stat_t
	if dirfd.Lstat(w.fileDir, w.fileName, &st) == nil && st.Ino == w.observed.Ino && st.Size == w.observed.Size && st.Mtim == w.observed.Mtim {
		w.observed.Ctim = st.Ctim
	}
}

// Appends in place. An append (a write through a handle opened O_APPEND
// without O_TRUNC) while the owner has nothing uncommitted goes into the
// file itself, at its end, in one write(2) of the backing file: no temp,
// no commit, no new inode. Every reader sees it at once (tail -f), a
// descriptor opened before it reads it, and the lock stays on the file.
// Each append is whole and in order, as natively; a crash leaves the file
// with a prefix of the appends. With durability=full the owner's commit
// points (the opener's last close, fsync(2), the last release) fsync the
// file (syncAppends). While the owner has a rewrite pending (a temp), its
// appends go to the temp's end and are committed with it.

// appendsInPlace reports whether a write through h (an append, if
// appends) goes into the file: the machine's route
// (writeproto.Write.WriteRoute: an append, nothing of the owner's is
// uncommitted, and the file has no set-ID bit, which new content never
// keeps: the temp's copy drops it, ensureTemp), and the file writable by
// the daemon. The caller holds w.entry's lock.
func (w *pendingWrite) appendsInPlace(h *writeHandle, appends bool) bool {
	setID := w.observed.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0
	if w.m.WriteRoute(h.wh, appends, setID) != writeproto.RouteInPlace {
		return false
	}
	w.catchUp()
	if w.appendFd < 0 {
		fd, err := dirfd.Reopen(w.base, unix.O_WRONLY|unix.O_APPEND)
		if err != nil {
			return false // not writable by the daemon: the temp's rename still is
		}
		w.appendFd = fd
	}
	return true
}

// appendInPlace writes data through h at the end of the file itself. The file's new
// size and times become the observed ones: the owner's own change is no
// conflict for a later commit. The caller holds w.entry's lock.
func (w *pendingWrite) appendInPlace(h *writeHandle, data []byte) (int, syscall.Errno) {
	var n int
	err := w.node.fsys.ownMadeChange([]int{w.appendFd}, func() (err error) {
		n, err = unix.Write(w.appendFd, data)
		return err
	})
	w.m.AppendedInPlace(h.wh, n)
	var st unix.Stat_t
	if dirfd.Fstat(w.base, &st) == nil {
		w.observed = st
	}
	// Other views' sizes: the node the write began on and the handle's
	// own, which differ when the write outlived a retired node.
	w.node.fsys.notify.inode(w.node.EmbeddedInode())
	if h.node != w.node {
		w.node.fsys.notify.inode(h.node.EmbeddedInode())
	}
	if err == nil && n < len(data) {
		err = syscall.EIO
	}
	return max(n, 0), toErrno(err)
}

// syncAppends makes the appends in place durable (fsync), if asked. A
// failure is reported (syncFailed) and returned for a caller that can
// hear it (ctx: the request that asked).
func (w *pendingWrite) syncAppends(ctx context.Context, durable bool) syscall.Errno {
	if !durable || !w.m.Appended() || w.appendFd < 0 {
		return 0
	}
	w.m.AppendsSynced()
	return w.syncAppendFd(ctx)
}

// closeAppend closes the fd for appends in place; the base it was opened
// from is about to change or go. With durability=full the appends not yet
// synced are fsynced first; a failure is reported (syncFailed) and
// returned for a caller that can hear it (ctx: the request that closes it).
func (w *pendingWrite) closeAppend(ctx context.Context) syscall.Errno {
	if w.appendFd < 0 {
		return 0
	}
	var errno syscall.Errno
	if w.m.Appended() && w.node.fsys.opts.Durability == DurabilityFull {
		errno = w.syncAppendFd(ctx)
	}
	dirfd.Close(w.appendFd)
	w.appendFd = -1
	w.m.AppendsSynced()
	return errno
}

// syncAppendFd fsyncs the appends in place. A failure is reported here,
// whether or not a caller hears it: a commit at the last release, or an
// fd closed because another owner's commit replaced the file, has none.
func (w *pendingWrite) syncAppendFd(ctx context.Context) syscall.Errno {
	f := w.node.fsys
	err := f.failAt(StageSyncAppends)
	if err == nil {
		err = unix.Fsync(w.appendFd)
	}
	if err != nil {
		f.syncFailed(ctx, StageSyncAppends, w.place(), err)
		return syscall.EIO
	}
	return 0
}
