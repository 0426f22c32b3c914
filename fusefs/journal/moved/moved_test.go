package moved

import "testing"

func TestSince(t *testing.T) {
	var l Log
	l.Add(Rename{Seq: 5, From: "dK", To: "d5"})
	l.Add(Rename{Seq: 7, From: "d5/s", To: "t"})
	l.Add(Rename{Seq: 9, From: "x", To: "y"})
	l.Add(Rename{Seq: 11, From: "a/b", To: "c"})
	l.Drop(9)
	for _, tc := range []struct {
		path string
		seq  uint64
		want string
	}{
		{"dK/s", 1, "t"},     // the directory, then the name itself
		{"dK/s", 5, "dK/s"},  // the rename at its own seq is not after it
		{"dK/s/x", 1, "t/x"}, // beneath
		{"dKx/s", 1, "dKx/s"},
		{"x", 1, "x"}, // dropped: it did not happen
		{"a/b/c/d", 10, "c/c/d"},
		{"", 1, ""},
	} {
		if got := l.Since(tc.path, tc.seq); got != tc.want {
			t.Errorf("Since(%q, %d) = %q, want %q", tc.path, tc.seq, got, tc.want)
		}
	}
}

func TestBetween(t *testing.T) {
	var l Log
	l.Add(Rename{Seq: 5, From: "dK", To: "d5"})
	l.Add(Rename{Seq: 7, From: "d5/s", To: "t"})
	for _, tc := range []struct {
		path     string
		seq, end uint64
		want     string
	}{
		{"dK/s", 1, 5, "dK/s"}, // the rename at end is not before it
		{"dK/s", 1, 6, "d5/s"},
		{"dK/s", 1, 8, "t"},
		{"dK/s", 5, 8, "dK/s"}, // neither after seq 5 moves dK/s
	} {
		if got := l.Between(tc.path, tc.seq, tc.end); got != tc.want {
			t.Errorf("Between(%q, %d, %d) = %q, want %q", tc.path, tc.seq, tc.end, got, tc.want)
		}
	}
}
