package fusefs

import (
	"context"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
)

// The lock table in names' operations: a rename over, or an unlink of, a
// file another owner is writing is refused, and a write in progress follows
// its file when this mount renames it.

// fileLock is what the lock table says of the regular file a name leads
// to: its key, and who holds it if anyone does (held).
type fileLock struct {
	key    locks.Key
	holder locks.Owner
	held   bool
}

// lockOf looks up the regular file name in dir (one fstatat) in the lock
// table; a name that leads to no regular file is not held. The look and
// the lookup are one step under commitMu (read), as an open's are: a
// commit moves the lock with its rename, so a file being committed is
// never seen unlocked.
func (f *FS) lockOf(dir int, name string) fileLock {
	var st unix.Stat_t
	f.commitMu.RLock()
	defer f.commitMu.RUnlock()
	if dirfd.Lstat(dir, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileLock{}
	}
	l := fileLock{key: keyOf(&st)}
	l.holder, l.held = f.writeLocks.Holder(l.key)
	return l
}

// heldByOther refuses op (a rename over name in dir, an unlink of it) while
// another owner holds l, the lock of the file name leads to. Like a
// conflicting open, it waits briefly for a release already on its way.
func (f *FS) heldByOther(ctx context.Context, op string, dir *Node, name string, l fileLock) syscall.Errno {
	if !l.held {
		return 0
	}
	me := f.owner(ctx)
	for deadline := time.Now().Add(acquireWait); ; {
		if _, other := f.writeLocks.OtherHolder(l.key, me); !other {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f.refuse(ctx, op, dir, name, errcode.LockConflict, RuleLockOtherOwner)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// renamed tells the write in progress on the file with key that this mount
// renamed the file to name in the directory dir (fd dfd).
func (f *FS) renamed(key locks.Key, dir *Node, dfd int, name string) {
	f.eachPending(key, func(w *pendingWrite) {
		if fd, err := dirfd.Dup(dfd); err == nil {
			dirfd.Close(w.fileDir)
			w.fileDir, w.fileName, w.fileParent = fd, name, dir
			w.moved = true
		}
		w.refresh()
	})
}

// removed tells the write in progress on the file with key, if any, that
// this mount just removed the name it writes the file under (name in the
// directory dfd): an unlink, or a rename of another file over it, by the
// writer's own owner (another's is refused). As natively, the bytes go
// with the file, which that name no longer leads to (pendingWrite.gone);
// a commit must not take the file now under the name for a change from
// outside. A removed name other than the write's (another hard link) is
// not its business.
func (f *FS) removed(key locks.Key, dfd int, name string) {
	f.eachPending(key, func(w *pendingWrite) {
		var a, b unix.Stat_t
		if w.fileName != name || dirfd.Fstat(w.fileDir, &a) != nil || dirfd.Fstat(dfd, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			return
		}
		w.gone = true
	})
}

// metaHeldByOther refuses op (a chmod, chown or utimens of n, whose
// verified object fd holds) while another owner writes the file: the
// commit of that write compares the file's times with those it observed,
// and would take the change for one from outside (the writer's close
// would get EBUSY and its bytes a conflict copy), and the temp that
// becomes the file does not carry it. The owner writing the file may
// (Setattr applies the change to its temp too).
func (f *FS) metaHeldByOther(ctx context.Context, op string, n *Node, fd int) syscall.Errno {
	var st unix.Stat_t
	if dirfd.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	l := fileLock{key: keyOf(&st)}
	l.holder, l.held = f.writeLocks.Holder(l.key)
	return f.heldByOther(ctx, op, n, "", l)
}
