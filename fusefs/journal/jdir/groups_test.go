package jdir

import "testing"

// TestGroupName: a group's name and number, and names that are not one.
func TestGroupName(t *testing.T) {
	for _, tc := range []struct {
		seq  uint64
		name string
	}{{0, "g0"}, {63, "g0"}, {64, "g1"}, {1 << 20, "g16384"}} {
		if got := GroupName(tc.seq); got != tc.name {
			t.Errorf("GroupName(%d) = %q, want %q", tc.seq, got, tc.name)
		}
		if num, ok := GroupNum(tc.name); !ok || num != tc.seq>>GroupBits {
			t.Errorf("GroupNum(%q) = %d, %v", tc.name, num, ok)
		}
		if got, want := string(AppendGroupDir([]byte("x"), tc.seq))+"e", "x"+GroupPath(tc.seq, "e"); got != want {
			t.Errorf("AppendGroupDir(%d) then a name: %q, want %q (GroupPath)", tc.seq, got, want)
		}
	}
	for _, name := range []string{"g", "g01", "g+1", "g-1", "12", "12~pid:1~~~f", "gx", "G1"} {
		if _, ok := GroupNum(name); ok {
			t.Errorf("GroupNum(%q) took it for a group", name)
		}
	}
}

// TestSplitKept: a path beneath kept/ into its group and name.
func TestSplitKept(t *testing.T) {
	for _, tc := range []struct{ rel, group, name string }{
		{"5~pid:1~~~f", "", "5~pid:1~~~f"},
		{GroupPath(70, "70~pid:1~~~d%2Ff"), "g1", "70~pid:1~~~d%2Ff"},
		{"12", "", "12"},
	} {
		if g, n := SplitKept(tc.rel); g != tc.group || n != tc.name {
			t.Errorf("SplitKept(%q) = %q, %q; want %q, %q", tc.rel, g, n, tc.group, tc.name)
		}
	}
}
