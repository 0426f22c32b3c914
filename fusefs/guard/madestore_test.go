package guard

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
)

// TestMadeStoreRoundTrip: a made set saved and loaded by a new mount
// still says made of a file unchanged since, and host-placed (changed) of
// a file whose content, mtime or ctime moved while nothing was mounted; a
// missing store is empty, a corrupt one an error.
func TestMadeStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "state", "made.json")
	ids := map[string]ID{}
	stats := map[string]*unix.Stat_t{}
	var g Guard
	s := &g.Made
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	for _, name := range []string{"kept", "appended", "touched", "chmodded"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		gen, err := dirfd.Statx(dfd, name, &st)
		if err != nil {
			t.Fatal(err)
		}
		ids[name], stats[name] = ID{Key: locks.KeyOf(&st), Gen: gen}, &st
		s.Add(ids[name], &st)
	}
	if err := g.SaveStore(store, dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(store); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store: %v, %v; want mode 0600", fi, err)
	}
	// Behind the mount, while nothing is mounted.
	f, _ := os.OpenFile(filepath.Join(dir, "appended"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("more\n")
	f.Close()
	mt := stats["touched"].Mtim
	ts := []unix.Timespec{mt, mt} // the same times: only the ctime moves, as with cp -p
	unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, "touched"), ts, 0)
	os.Chmod(filepath.Join(dir, "chmodded"), 0o644)

	var lg Guard
	if err := lg.LoadStore(store); err != nil {
		t.Fatal(err)
	}
	loaded := &lg.Made
	for name, want := range map[string]MadeState{"kept": MadeFresh, "appended": MadeChanged, "touched": MadeChanged, "chmodded": MadeChanged} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		if got := loaded.Check(ids[name], &st); got != want {
			t.Errorf("%s after a remount: %v, want %v", name, got, want)
		}
	}
	var empty Guard
	if err := empty.LoadStore(filepath.Join(dir, "none.json")); err != nil || empty.Made.Len() != 0 {
		t.Errorf("a missing store: %v, %d entries; want none, no error", err, empty.Made.Len())
	}
	os.WriteFile(store, []byte("{not json"), 0o600)
	if err := empty.LoadStore(store); err == nil {
		t.Error("a corrupt store loaded without an error")
	}
}

// TestCredsStoredAcrossMounts: a credential's identity saved by one mount
// is refused by the next (a hard link to a key whose own name the first
// removed), until that mount's scan, having walked all of BACKING, met no
// file of its inode number: then it is forgotten, so that a later file
// given the number (a filesystem with no birth time) is not refused.
func TestCredsStoredAcrossMounts(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "state", "made.json")
	kept := ID{Key: locks.Key{Dev: 7, Ino: 100}, Gen: 1}
	gone := ID{Key: locks.Key{Dev: 7, Ino: 200}, Gen: 2}
	var g Guard
	g.Creds.Add(kept)
	g.Creds.Add(gone)
	if err := g.SaveStore(store, dir); err != nil {
		t.Fatal(err)
	}
	var next Guard
	if err := next.LoadStore(store); err != nil {
		t.Fatal(err)
	}
	for _, id := range []ID{kept, gone} {
		if !next.Creds.Knows(id) {
			t.Errorf("%v: not a credential at the next mount", id)
		}
	}
	next.Creds.Meet(100) // the scan meets the link that stayed
	next.Creds.DropUnmet()
	if !next.Creds.Knows(kept) {
		t.Error("the identity of a link the scan met was dropped")
	}
	if next.Creds.Knows(gone) {
		t.Error("the identity of a file the scan did not meet is still refused")
	}
}
