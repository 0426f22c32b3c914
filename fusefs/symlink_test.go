package fusefs

import "testing"

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
