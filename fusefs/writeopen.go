package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/locks"
)

// A write open's way to the owner's write in progress (the write engine,
// writeengine): the lock it takes, and the handle it makes over the write.

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
	w, again, err := f.engine.Join(e, lease, owner, n, base, pn, pfd, name, st, flags&syscall.O_CREAT != 0)
	if err != nil || again {
		return nil, 0, toErrno(err), again
	}
	opener := f.processOf(caller(ctx).Pid)
	wh, err := w.Open(ctx, lease, writeengine.Open{Write: writeFlags(flags), Append: flags&syscall.O_APPEND != 0,
		Truncate: flags&syscall.O_TRUNC != 0, Opener: opener, Kind: flags & sameOpenMask, Hold: lease},
		n.StableAttr().Ino)
	if err != nil {
		return nil, 0, toErrno(err), false
	}
	h := &writeHandle{handle: handle{node: n}, lease: lease, pending: w, wh: wh, opener: opener}
	h.flags.Store(flags)
	fh = h
	// Direct I/O keeps this owner's uncommitted bytes out of the kernel's
	// page cache, which readers of other owners share.
	return fh, fuse.FOPEN_DIRECT_IO, 0, false
}

// ownWrite returns, locked, the caller's own write in progress on the file
// with key; nil if there is none. The caller must unlock w.Entry().
func (f *FS) ownWrite(ctx context.Context, key locks.Key) *pendingWrite {
	return f.engine.OwnWrite(f.owner(ctx), key)
}

// ownChange tells the write in progress on n's file, if any, that this
// mount itself just changed the file's metadata (chmod, link, an xattr);
// apply, if not nil, makes the same change to the temp
// (writeengine.Engine.OwnChange).
func (n *Node) ownChange(apply func(temp int) error) {
	n.fsys.engine.OwnChange(n.key(), apply)
}
