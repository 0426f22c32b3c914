package guard

import (
	"slices"
	"testing"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// newNameLocks is a lock table of its own, with file held by owner "a".
func newNameLocks(t *testing.T, dir int, file string) (NameLocks, locks.Key) {
	t.Helper()
	n := NameLocks{Table: locks.NewTable(), CommitMu: new(lockorder.RWMutex[lockorder.CommitMu])}
	id, _ := identity(t, dir, file)
	lease, err := n.Table.Acquire(id.Key, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lease.Release)
	return n, id.Key
}

// TestLockOf: a name leading to a regular file has its key, and its holder
// if it is held; any other name is not held and leads to no regular file.
func TestLockOf(t *testing.T) {
	_, dir := tree(t, "held", "free", "d/")
	n, held := newNameLocks(t, dir, "held")
	free, _ := identity(t, dir, "free")
	for _, c := range []struct {
		name string
		want FileLock
	}{
		{"held", FileLock{Key: held, Holder: "a", Held: true}},
		{"free", FileLock{Key: free.Key}},
		{"d", FileLock{}},
		{"gone", FileLock{}},
	} {
		if got := n.LockOf(dir, c.name); got != c.want {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
		if got := n.LockOf(dir, c.name); got.Regular() != (c.want.Key != locks.Key{}) {
			t.Errorf("%s: regular %v", c.name, got.Regular())
		}
	}
	if got := n.LockOfFd(openDir(t, t.TempDir(), "")); got != (FileLock{}) {
		t.Errorf("LockOfFd of a directory: %+v; want nothing", got)
	}
}

// TestBeginMove: the regular files the places lead to are marked, and
// their locks returned as the marks found them.
func TestBeginMove(t *testing.T) {
	_, dir := tree(t, "held", "free", "d/")
	n, held := newNameLocks(t, dir, "held")
	free, _ := identity(t, dir, "free")
	var marked []locks.Key
	ended := false
	begin := func(keys []locks.Key) func() {
		marked = keys
		return func() { ended = true }
	}
	ls, end := n.BeginMove(begin, nil, Place{dir, "held"}, Place{dir, "d"}, Place{dir, "free"})
	if !slices.Equal(marked, []locks.Key{held, free.Key}) {
		t.Errorf("marked %v; want %v", marked, []locks.Key{held, free.Key})
	}
	if len(ls) != 3 || !ls[0].Held || ls[1].Regular() || ls[2].Held || ls[2].Key != free.Key {
		t.Errorf("locks %+v", ls)
	}
	if ended {
		t.Error("the marks ended before the caller ended them")
	}
	end()
	if !ended {
		t.Error("end did not end the marks")
	}
}

// TestBeginMoveSeen: the caller's own look is marked first; a look of it
// that no longer holds (the file at a name changed since: here a key that
// is not free's) has its marks ended and the files the names lead to now
// marked instead.
func TestBeginMoveSeen(t *testing.T) {
	_, dir := tree(t, "held", "free", "d/")
	n, held := newNameLocks(t, dir, "held")
	free, _ := identity(t, dir, "free")
	places := []Place{{dir, "held"}, {dir, "free"}}
	var marked [][]locks.Key
	ends := 0
	begin := func(keys []locks.Key) func() {
		marked = append(marked, keys)
		return func() { ends++ }
	}
	seen := []FileLock{n.LockOf(dir, "held"), n.LockOf(dir, "free")}
	ls, end := n.BeginMove(begin, seen, places...)
	if len(marked) != 1 || !slices.Equal(marked[0], []locks.Key{held, free.Key}) || ends != 0 {
		t.Errorf("a look that holds: marked %v, %d ended; want one marking of %v", marked, ends, []locks.Key{held, free.Key})
	}
	if len(ls) != 2 || !ls[0].Held || ls[1].Key != free.Key {
		t.Errorf("locks %+v", ls)
	}
	end()

	marked, ends = nil, 0
	stale := []FileLock{seen[0], {Key: locks.Key{Dev: free.Key.Dev, Ino: free.Key.Ino + 1000}}}
	ls, end = n.BeginMove(begin, stale, places...)
	want := [][]locks.Key{{held, stale[1].Key}, {held, free.Key}}
	if len(marked) != 2 || !slices.Equal(marked[0], want[0]) || !slices.Equal(marked[1], want[1]) || ends != 1 {
		t.Errorf("a stale look: marked %v, %d ended; want %v, the first ended", marked, ends, want)
	}
	if len(ls) != 2 || ls[1].Key != free.Key {
		t.Errorf("locks after a stale look %+v; want free's key %v", ls, free.Key)
	}
	end()
}

// TestReplacesOthers: a rename replaces another owner's file at its new
// name, and for an exchange at its old name too; the caller's own, a
// file no one holds and a name that leads to none are no one else's.
func TestReplacesOthers(t *testing.T) {
	_, dir := tree(t, "held", "free", "d/")
	n, _ := newNameLocks(t, dir, "held")
	for _, c := range []struct {
		name, newName string
		exchange      bool
		me            locks.Owner
		want          bool
	}{
		{"free", "held", false, "b", true},
		{"free", "held", false, "a", false},
		{"held", "free", false, "b", false},
		{"held", "free", true, "b", true},
		{"free", "gone", true, "b", false},
		{"free", "d", false, "b", false},
	} {
		r := RenameNames{OldDir: dir, NewDir: dir, Name: c.name, NewName: c.newName, Exchange: c.exchange}
		if _, got := n.ReplacesOthers(r, c.me); got != c.want {
			t.Errorf("%s → %s (exchange %v) by %s: %v; want %v", c.name, c.newName, c.exchange, c.me, got, c.want)
		}
	}
}
