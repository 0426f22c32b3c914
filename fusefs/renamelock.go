package fusefs

import (
	"context"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"realm/errcode"
	"realm/fusefs/dirfd"
	"realm/locks"
)

// The lock table in names' operations: a rename over, or an unlink of, a
// file another owner is writing is refused, and a write in progress follows
// its file when this mount renames it.

// heldByOther refuses op (a rename over name, an unlink of it) while
// another owner holds the lock of the file that name in dir is now. Like a
// conflicting open, it waits briefly for a release already on its way.
func (f *FS) heldByOther(ctx context.Context, op string, dir *Node, dfd int, name string) syscall.Errno {
	key, holder, held := f.fileKey(dfd, name)
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

// fileKey is the lock-table key of the regular file name in dir, and who
// holds it, if anyone does.
func (f *FS) fileKey(dir int, name string) (locks.Key, locks.Owner, bool) {
	var st unix.Stat_t
	if dirfd.Lstat(dir, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return locks.Key{}, "", false
	}
	key := keyOf(&st)
	holder, held := f.writeLocks.Holder(key)
	return key, holder, held
}

// renamed tells the write in progress on the file with key that this mount
// renamed the file to name in the directory dir (fd dfd).
func (f *FS) renamed(key locks.Key, dir *Node, dfd int, name string) {
	w := f.pendingFor(key)
	if w == nil {
		return
	}
	defer w.entry.Unlock()
	if fd, err := dirfd.Dup(dfd); err == nil {
		dirfd.Close(w.fileDir)
		w.fileDir, w.fileName, w.fileParent = fd, name, dir
	}
	w.refresh()
}
