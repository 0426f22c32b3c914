package guard

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirRename: a rename is judged by a symlink's new name, or by what a
// directory holds, only holding the names beneath still (exclusive).
func TestDirRename(t *testing.T) {
	root, dir := tree(t, "keys/.env", "plain/a", "file")
	if err := os.Symlink("plain", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	g := newGuard()
	none := func(string) bool { return false }
	for _, c := range []struct {
		name, rel, newRel string
		exclusive         bool
		want              RenameFinding
		again             bool
	}{
		{"keys", "keys", "x", false, RenameFinding{}, true},
		{"keys", "keys", "x", true, RenameFinding{Path: "keys/.env"}, false},
		{"plain", "plain", "y", true, RenameFinding{}, false},
		{"link", "link", ".git/hooks", false, RenameFinding{Path: ".git/hooks", Protected: true}, false},
		{"link", "link", "z", false, RenameFinding{}, false},
		{"file", "file", ".git/hooks", false, RenameFinding{}, false}, // the name's own checks judge it
		{"gone", "gone", "w", true, RenameFinding{}, false},
	} {
		got, again, err := g.DirRename(dir, c.name, c.rel, c.newRel, c.exclusive, none)
		if err != nil || got != c.want || again != c.again {
			t.Errorf("%s → %s (exclusive %v): %+v, again %v, %v; want %+v, again %v", c.rel, c.newRel, c.exclusive, got, again, err, c.want, c.again)
		}
	}
	if got, again, err := (&Guard{}).DirRename(dir, "keys", "keys", "x", false, none); got != (RenameFinding{}) || again || err != nil {
		t.Errorf("no policy: %+v, again %v, %v; want nothing", got, again, err)
	}
}

// TestLinkMoved: a link is judged from its new directory, a directory
// moving shallower by the links beneath it (with the names held still),
// a directory moving deeper not at all.
func TestLinkMoved(t *testing.T) {
	root, _ := tree(t, "a/b/c/", "a/b/file")
	for link, target := range map[string]string{"a/b/up": "..", "a/b/c/up2": "../.."} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	a := openDir(t, root, "a")
	b := openDir(t, root, "a/b")
	for _, c := range []struct {
		pfd                  int
		name, oldRel, newRel string
		exclusive            bool
		want                 LinkMove
		again                bool
	}{
		{b, "up", "a/b/up", "a/up", false, LinkMove{}, false},            // climbs to the root
		{b, "up", "a/b/up", "up", false, LinkMove{Escapes: true}, false}, // climbs out
		{b, "up", "a/b/up", "x/y/up", false, LinkMove{}, false},
		{b, "c", "a/b/c", "c", false, LinkMove{}, true},
		{b, "c", "a/b/c", "c", true, LinkMove{Escapes: true, Path: "up2", Dir: true}, false},
		{b, "c", "a/b/c", "x/c", true, LinkMove{Dir: true}, false},
		{a, "b", "a/b", "b", true, LinkMove{Dir: true}, false}, // b/c/up2 climbs to the root
		{a, "b", "a/b", "x/y/b", false, LinkMove{}, false},     // deeper: nothing climbs further
		{b, "file", "a/b/file", "file", false, LinkMove{}, false},
		{b, "gone", "a/b/gone", "gone", true, LinkMove{}, false},
	} {
		got, again, err := LinkMoved(c.pfd, c.name, c.oldRel, c.newRel, c.exclusive)
		if err != nil || got != c.want || again != c.again {
			t.Errorf("%s → %s (exclusive %v): %+v, again %v, %v; want %+v, again %v", c.oldRel, c.newRel, c.exclusive, got, again, err, c.want, c.again)
		}
	}
}
