package guard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStaysInside(t *testing.T) {
	tests := []struct {
		depth  int
		target string
		want   bool
	}{
		{0, "a", true},
		{0, "a/b/../c", false}, // not normal: b may be a link, and .. climbs from its target
		{2, "../../a/b", true},
		{2, "..//./../a/./b/", true},
		{2, "../a/../b", false},
		{1, "d/up/..", false}, // issue 28: with d/up -> .., BACKING's parent
		{0, ".", true},
		{0, "./a", true},
		{0, "a/../..", false},
		{0, "..", false},
		{0, "../x", false},
		{1, "../x", true},
		{1, "../../x", false},
		{2, "../../x", true},
		{3, "a/../../../../x", false},
		{4, "../../../../x", true},
		{3, "a/../../../../../x", false},
		{0, "/etc/passwd", false},
		{5, "/", false},
		{0, "", false},
		{0, "a//b", true},
		{-1, "a", false},
		{1, "x/../../..", false},
	}
	for _, tt := range tests {
		if got := StaysInside(tt.depth, tt.target); got != tt.want {
			t.Errorf("StaysInside(%d, %q) = %v, want %v", tt.depth, tt.target, got, tt.want)
		}
	}
}

// TestResolvesInside: a new link's target is followed in BACKING through
// the links it meets, as the host's kernel would; one met that is not
// normal or climbs out makes the new one lead out too.
func TestResolvesInside(t *testing.T) {
	backing := t.TempDir()
	root, err := unix.Open(backing, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(backing, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"a/up":   "..",       // the root
		"a/out":  "../../x",  // out
		"a/odd":  "b/../..",  // not normal
		"a/loop": "loop",     // resolves to nothing
		"c/toa":  "../a",     // a, inside
		"c/deep": "toa/b",    // a/b, through toa
		"c/bad":  "toa/out",  // out, through toa
		"c/file": "../a/b/f", // missing: inside by its text
	} {
		if err := os.Symlink(target, filepath.Join(backing, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir, target string
		want        bool
	}{
		{"", "a/b", true},
		{"", "a/up/c", true},
		{"", "a/out", false},
		{"", "a/odd", false},
		{"", "a/loop", true},
		{"c", "deep", true},
		{"c", "bad", false},
		{"c", "toa/out/x", false},
		{"c", "file", true},
		{"a/b", "../../c/deep", true},
		{"", "nothing/../..", true}, // a missing name ends the walk; staysInside judges the text
	} {
		if got := ResolvesInside(root, tc.dir, tc.target); got != tc.want {
			t.Errorf("ResolvesInside(%q, %q) = %v, want %v", tc.dir, tc.target, got, tc.want)
		}
	}
}

func TestPathDepth(t *testing.T) {
	for rel, want := range map[string]int{"": 0, "a": 1, "a/b": 2, "a/b/c": 3} {
		if got := PathDepth(rel); got != want {
			t.Errorf("PathDepth(%q) = %d, want %d", rel, got, want)
		}
	}
}

// TestLinkEscapingBeneath: a directory moved to a depth is judged by the
// links beneath it, each from its own directory's new depth.
func TestLinkEscapingBeneath(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"up": "..", "sub/up2": "../../.."} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, tc := range []struct {
		depth    int
		escaping bool
	}{
		{2, false}, // up climbs from depth 2 to 1, sub/up2 from depth 3 to 0
		{1, true},  // sub/up2 from depth 2 climbs out; up reaches the root
		{0, true},
	} {
		esc, scanned := linkEscapingBeneath(fd, tc.depth)
		if (esc != "") != tc.escaping || !scanned {
			t.Errorf("depth %d: escaping %q, scanned %v; want escaping %v, scanned", tc.depth, esc, scanned, tc.escaping)
		}
	}
}

// TestJudgeSymlink: a symlink being made is judged by its target's escape
// first (the rule, a hidden name, its resolution in BACKING), then its
// target's credential, then its own path as a protected prefix.
func TestJudgeSymlink(t *testing.T) {
	backing, root := tree(t, "a/b/", ".git/")
	if err := os.Symlink("../..", filepath.Join(backing, "a/b/up")); err != nil {
		t.Fatal(err)
	}
	g := newGuard()
	hidden := func(name string) bool { return strings.HasPrefix(name, ".tmp-") }
	for _, c := range []struct {
		dir, name, target string
		want              SymlinkRule
		matched           string
	}{
		{"a", "l", "b", SymlinkAllowed, ""},
		{"a", "l", "../..", SymlinkEscapes, ""},
		{"a", "l", "b/../..", SymlinkEscapes, ""}, // not normal
		{"a", "l", "b/.tmp-x", SymlinkEscapes, ""},
		{"a", "l", "b/up/..", SymlinkEscapes, ""}, // resolves out through b/up
		{"a", "l", "../.env", SymlinkCredential, ".env"},
		{"a", "l", "../../.env", SymlinkEscapes, ""}, // the escape comes first
		{"", "hooks", "a", SymlinkAllowed, ""},
		{".git", "hooks", "../a", SymlinkPlants, ""},
		{".git", "hooks", "../.env", SymlinkCredential, ".env"}, // the credential comes first
	} {
		rel := c.name
		if c.dir != "" {
			rel = c.dir + "/" + c.name
		}
		if got, matched := g.JudgeSymlink(root, c.dir, rel, c.target, hidden); got != c.want || matched != c.matched {
			t.Errorf("%s -> %s: %v %q; want %v %q", rel, c.target, got, matched, c.want, c.matched)
		}
	}
	if got, _ := (&Guard{}).JudgeSymlink(root, ".git", ".git/hooks", "../.env", hidden); got != SymlinkAllowed {
		t.Errorf("no policy: %v; want allowed", got)
	}
	if got, _ := (&Guard{}).JudgeSymlink(root, "a", "a/l", "../..", hidden); got != SymlinkEscapes {
		t.Errorf("no policy, escaping: %v; want escapes", got)
	}
}
