package fusefs

import (
	"os"
	"path/filepath"
	"testing"
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
		if got := staysInside(tt.depth, tt.target); got != tt.want {
			t.Errorf("staysInside(%d, %q) = %v, want %v", tt.depth, tt.target, got, tt.want)
		}
	}
}

// TestResolvesInside: a new link's target is followed in BACKING through
// the links it meets, as the host's kernel would; one met that is not
// normal or climbs out makes the new one lead out too.
func TestResolvesInside(t *testing.T) {
	tf := newTestFS(t, nil)
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(tf.backing, d), 0o755); err != nil {
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
		if err := os.Symlink(target, filepath.Join(tf.backing, link)); err != nil {
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
		if got := tf.resolvesInside(tc.dir, tc.target); got != tc.want {
			t.Errorf("resolvesInside(%q, %q) = %v, want %v", tc.dir, tc.target, got, tc.want)
		}
	}
}
