package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
)

// The lock table in names' operations: a rename over, or an unlink of, a
// file another owner is writing is refused, and a write in progress follows
// its file when this mount renames it, as natively the writer's bytes land
// under the file's new name.

// fileLock is what the lock table says of the regular file a name leads
// to: its key, and who holds it if anyone does (held).
type fileLock struct {
	key    locks.Key
	holder locks.Owner
	held   bool
}

// regular reports whether l's name led to a regular file.
func (l fileLock) regular() bool { return l.key != (locks.Key{}) }

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
	if _, other := f.writeLocks.WaitOthers(ctx, l.key, me, patience()); other {
		return f.refuse(ctx, op, dir, name, errcode.LockConflict, RuleLockOtherOwner)
	}
	return 0
}

// A rename through the mount moves a file between two of the steps of
// any commit of a write of it, so it marks the files it moves before it
// renames, waiting out the commits of their writes under way, and
// unmarks them once the writes have followed (writeengine: BeginMoves
// says why).

// beginMove marks the regular files the names (name in the directory fd
// of each place) lead to as moving (writeengine.Engine.BeginMoves), and
// returns their locks as the marks found them and the end of the marks,
// which the caller calls once every write of them has followed the
// rename. A name that leads to no regular file marks nothing. A commit
// that replaced a file between its look and its mark is met by a look
// again: the file the name leads to now is marked instead.
func (f *FS) beginMove(places ...place) (ls []fileLock, end func()) {
	for {
		ls = make([]fileLock, len(places))
		var keys []locks.Key // of regular files
		for i, p := range places {
			if ls[i] = f.lockOf(p.dir, p.name); ls[i].regular() {
				keys = append(keys, ls[i].key)
			}
		}
		end = f.engine.BeginMoves(keys)
		same := true
		for i, p := range places {
			same = same && f.lockOf(p.dir, p.name).key == ls[i].key
		}
		if same {
			return ls, end
		}
		end()
	}
}

// place is a name in the directory held by dir.
type place struct {
	dir  int
	name string
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
