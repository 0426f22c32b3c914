package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/inodes"
	"github.com/realm-dev/realm/locks"
)

// TestMadeUpNumberIsKept: an object of any type whose backing inode number
// a live node borrows gets a number the mount makes up, and every lookup
// while the kernel knows its node, racing ones too, answers that node and
// number; once forgotten, the number is kept for the object
// (inodes.Table.Forget), for its next node.
func TestMadeUpNumberIsKept(t *testing.T) {
	tf := newTestFS(t, nil)
	if err := os.Mkdir(filepath.Join(tf.backing, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(tf.backing, "s")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tf.backing, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	tf.write(t, "f", "x")
	for _, name := range []string{"d", "s", "p", "f"} {
		st := backingStat(t, tf, name)
		// A retired node still answers to the number.
		tf.inos.Retired(&Node{}, st.Ino, locks.Key{}, 0)

		const lookups = 8
		got := make([]*fs.Inode, lookups)
		var wg sync.WaitGroup
		for i := range lookups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out fuse.EntryOut
				in, errno := tf.root.Lookup(context.Background(), name, &out)
				if errno != 0 {
					t.Errorf("lookup %s: %v", name, errno)
				}
				got[i] = in
			}()
		}
		wg.Wait()
		first := got[0]
		if first == nil {
			t.Fatalf("%s: no node", name)
		}
		if first.StableAttr().Ino&inodes.BorrowedBit == 0 {
			t.Errorf("%s: inode number %d, want one the mount made up", name, first.StableAttr().Ino)
		}
		tf.root.AddChild(name, first, true)
		again := tf.lookup(t, name)
		for i, in := range append(got, again.EmbeddedInode()) {
			if in != first {
				t.Errorf("%s: lookup %d answered inode number %d, the first %d", name, i, in.StableAttr().Ino, first.StableAttr().Ino)
			}
		}
		kept := tf.inos.Kept()
		asNode(first).OnForget()
		if objects, nodes := tf.inos.Entries(); objects+nodes != 0 {
			t.Errorf("%s: %d entries left once the node is forgotten", name, objects+nodes)
		}
		if tf.inos.Kept() != kept+1 || !tf.inos.Borrowed(first.StableAttr().Ino) {
			t.Errorf("%s: its made-up number %d not kept once its node is forgotten", name, first.StableAttr().Ino)
		}
	}
}

// TestRekeyedKeepsOneEntry: a file rewritten many times keeps one entry in
// rekeyed, its current identity, so a forget does not walk the history.
func TestRekeyedKeepsOneEntry(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "0")
	for i := range 5 {
		h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
		writeAll(t, h, string(rune('1'+i)))
		if errno := h.Fsync(as(1), 0); errno != 0 {
			t.Fatalf("fsync = %v", errno)
		}
		h.Release(as(1))
	}
	tf.wantContent(t, "f", "5", "after five commits")
	if objects, nodes := tf.inos.Entries(); objects != 1 || nodes != 1 {
		t.Errorf("rekeyed holds %d entries (%d nodes), want 1", objects, nodes)
	}
}

// isBorrowed reports whether a live node answers to inode number ino
// without its backing file having it.
func (f *FS) isBorrowed(ino uint64) bool { return f.inos.Borrowed(ino) }
