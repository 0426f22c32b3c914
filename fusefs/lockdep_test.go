//go:build lockdep

package fusefs

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/inodes"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// The checks the lock order puts where realm leaves its own locks: each
// fails a test (here, is caught) when a realm lock is held there.

// TestGoFuseNotUnderCommitMu: a look into go-fuse's tree with commitMu
// held is reported (issue 18's deadlock); with a leaf held it is not.
func TestGoFuseNotUnderCommitMu(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "x")
	tf.lookup(t, "f")
	vs := lockorder.Catch(func() {
		tf.commitMu.RLock()
		defer tf.commitMu.RUnlock()
		tf.root.childInode("f")
	})
	if len(vs) != 1 || !strings.Contains(vs[0].Taking, "Inode.GetChild") || vs[0].Held != "FS.commitMu (read)" {
		t.Errorf("GetChild under commitMu: %v", vs)
	}
	if !strings.Contains(vs[0].TakingStack, "fusefs.(*Node).childInode") || !strings.Contains(vs[0].HeldStack, "TestGoFuseNotUnderCommitMu") {
		t.Errorf("stacks:\n%s\n%s", vs[0].TakingStack, vs[0].HeldStack)
	}
	// The inode table's lock is a leaf: a node is made under it (inodes.Table.MadeUp).
	const ino = 12345
	tf.inos.Retired(&Node{}, ino, locks.Key{}, 0)
	vs = lockorder.Catch(func() {
		tf.inos.MadeUp(inodes.FileID{}, ino, func(uint64) (*Node, uint64) {
			tf.root.childInode("f")
			return nil, 0
		})
	})
	if len(vs) != 0 {
		t.Errorf("GetChild under a leaf: %v", vs)
	}
}

// TestCopyBetweenTwoWritesInOrder: CopyFileRange holds two writes'
// entries, in the order the writes began, whichever way it copies
// (writeengine's lockPair).
func TestCopyBetweenTwoWritesInOrder(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "a", "aaaa")
	tf.write(t, "b", "bbbb")
	a := tf.openWrite(t, 1, "a", syscall.O_RDWR)
	b := tf.openWrite(t, 1, "b", syscall.O_RDWR)
	writeAll(t, a, "A")
	writeAll(t, b, "B")
	defer a.Release(as(1))
	defer b.Release(as(1))
	for _, dir := range [][2]*writeHandle{{a, b}, {b, a}} {
		var errno syscall.Errno
		vs := lockorder.Catch(func() {
			_, errno = tf.root.CopyFileRange(as(1), dir[0], 0, nil, dir[1], 1, 1, 0)
		})
		if errno != 0 || len(vs) != 0 {
			t.Errorf("copy_file_range = %v; %v", errno, vs)
		}
	}
}

// TestLinkOfAFileBeingWritten: a hard link to a file an owner is writing
// tells that write of its new ctime with no nsMu held: a commit holds the
// write's entry into nsMu, and Link held nsMu into the entry (with a
// directory rename waiting for nsMu between them, a deadlock).
func TestLinkOfAFileBeingWritten(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	defer h.Release(as(1))
	f := tf.lookup(t, "f")
	var out fuse.EntryOut
	var errno syscall.Errno
	vs := lockorder.Catch(func() { _, errno = tf.root.Link(as(1), f, "g", &out) })
	if errno != 0 {
		t.Fatalf("link = %v", errno)
	}
	if len(vs) != 0 {
		t.Errorf("link of a file being written: %v", vs)
	}
}

// TestNoLockHeldWaitingForTheScan: a wait for the mount-time scan with a
// realm lock held is reported; once the scan is done, asking is not a wait.
func TestNoLockHeldWaitingForTheScan(t *testing.T) {
	tf := newTestFS(t, nil)
	scanned := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		close(scanned)
	}()
	vs := lockorder.Catch(func() {
		tf.nsMu.RLock()
		defer tf.nsMu.RUnlock()
		guard.AwaitScan(scanned)
		guard.AwaitScan(scanned)
	})
	if len(vs) != 1 || vs[0].Taking != "a wait for the mount-time scan" {
		t.Errorf("waits for the scan under nsMu: %v", vs)
	}
}
