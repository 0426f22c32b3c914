//go:build lockdep

package writeengine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/internal/lockorder"
)

// TestLockPairInOrder: lockPair takes two writes' entries in the order the
// writes began, whichever way a copy goes; the other order is caught.
func TestLockPairInOrder(t *testing.T) {
	d := newEngineDir(t, "ffff")
	if err := os.WriteFile(filepath.Join(d.path, "g"), []byte("gggg"), 0o644); err != nil {
		t.Fatal(err)
	}
	var files [2]*File[*fakeNode]
	for i, name := range []string{"f", "g"} {
		f, err := d.openAs("a", name, unix.O_RDWR, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release(t.Context())
		files[i] = f
	}
	a, b := files[0].Pending(), files[1].Pending()
	for _, dir := range [][2]*Write[*fakeNode]{{a, b}, {b, a}} {
		if vs := lockorder.Catch(func() { lockPair(dir[0], dir[1])() }); len(vs) != 0 {
			t.Errorf("lockPair: %v", vs)
		}
	}
	first, second := a, b
	if second.seq < first.seq {
		first, second = second, first
	}
	vs := lockorder.Catch(func() {
		second.entry.LockOrdered(second.seq)
		first.entry.LockOrdered(first.seq)
		first.entry.Unlock()
		second.entry.Unlock()
	})
	if len(vs) != 1 || !strings.HasPrefix(vs[0].Taking, "locks.Entry (pendingWrite.seq") {
		t.Errorf("two entries against their writes' order: %v", vs)
	}
}
