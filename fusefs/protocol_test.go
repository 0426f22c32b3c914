package fusefs

import (
	"syscall"
	"testing"

	"github.com/realm-dev/realm/locks"
)

// TestCommitTakesNoGoFuseLockUnderCommitMu: a commit looks up the node the
// kernel knows for the file (a go-fuse lock) before it takes commitMu, never
// under it. Under it, a go-fuse lock held by a request waiting for commitMu
// deadlocked the mount (issue 18, case 10).
func TestCommitTakesNoGoFuseLockUnderCommitMu(t *testing.T) {
	looked := 0
	tf := newTestFS(t, func(o *Options) {
		o.beforeGoFuseLock = func(f *FS) {
			looked++
			if !f.commitMu.TryLock() {
				t.Error("a go-fuse lock taken with commitMu held")
				return
			}
			f.commitMu.Unlock()
		}
	})
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	if errno := h.Fsync(as(1), 0); errno != 0 {
		t.Fatalf("fsync = %v", errno)
	}
	h.Release(as(1))
	if looked == 0 {
		t.Fatal("the commit looked up no node: the check saw nothing")
	}
	tf.wantContent(t, "f", "new", "after the commit")
}

// TestCommitMovesTheLockWithTheRename: after a commit the lock is on the new
// file, held by the writer, and another owner's open of the file is EBUSY;
// the move is done in replace, under commitMu with the rename.
func TestCommitMovesTheLockWithTheRename(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	var seen bool
	old := backingStat(t, tf, "f")
	if errno := commitWith(t, tf, h, func() {
		// Right after replace, before settle: the lock is where the file is.
		st := backingStat(t, tf, "f")
		owner, held := tf.FS.writeLocks.Holder(locks.KeyOf(&st))
		seen = held && owner == h.file.Pending().Entry().Owner()
		if _, held := tf.FS.writeLocks.Holder(locks.KeyOf(&old)); held {
			t.Error("the replaced file's identity still holds a lock")
		}
	}); errno != 0 {
		t.Fatalf("commit = %v", errno)
	}
	if !seen {
		t.Error("right after the rename, the new file is not locked by the writer")
	}
	if _, _, errno := tf.lookup(t, "f").Open(as(2), syscall.O_WRONLY); errno != syscall.EBUSY {
		t.Errorf("another owner's open after the commit = %v, want EBUSY", errno)
	}
	h.Release(as(1))
}

// commitWith commits h's write, running between (if not nil) right after
// replace has renamed, before settle.
func commitWith(t *testing.T, tf *testFS, h *writeHandle, between func()) syscall.Errno {
	t.Helper()
	tf.opts.afterReplace = between
	defer func() { tf.opts.afterReplace = nil }()
	return h.file.Commit(as(1), false)
}

// TestAppendInPlace: an append goes into the file at once, under the same
// inode, with no temp; another owner's append shares the file, another
// owner's rewrite is EBUSY; nothing is left to commit at the release.
func TestAppendInPlace(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	before := backingStat(t, tf, "f")
	a := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_APPEND)
	if n, errno := a.Write(as(1), []byte("+a"), 0); errno != 0 || n != 2 {
		t.Fatalf("append = %d, %v", n, errno)
	}
	tf.wantContent(t, "f", "old+a", "right after the append, before any close")
	if n := len(tf.temps(t)); n != 0 {
		t.Errorf("%d temps for an append, want none", n)
	}
	b := tf.openWrite(t, 2, "f", syscall.O_WRONLY|syscall.O_APPEND)
	if n, errno := b.Write(as(2), []byte("+b"), 0); errno != 0 || n != 2 {
		t.Fatalf("another owner's append = %d, %v", n, errno)
	}
	tf.wantContent(t, "f", "old+a+b", "after another owner's append")
	if _, _, errno := tf.lookup(t, "f").Open(as(3), syscall.O_WRONLY|syscall.O_TRUNC); errno != syscall.EBUSY {
		t.Errorf("a third owner's rewrite beside appenders = %v, want EBUSY", errno)
	}
	for _, c := range []struct {
		h   *writeHandle
		pid uint32
	}{{a, 1}, {b, 2}} {
		if errno := c.h.Flush(as(c.pid)); errno != 0 {
			t.Errorf("flush = %v", errno)
		}
		c.h.Release(as(c.pid))
	}
	if after := backingStat(t, tf, "f"); after.Ino != before.Ino {
		t.Errorf("the file changed inode (%d → %d): the append was a rewrite", before.Ino, after.Ino)
	}
	tf.wantContent(t, "f", "old+a+b", "after the releases")
	tf.wantNoTemps(t)
}
