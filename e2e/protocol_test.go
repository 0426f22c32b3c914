package e2e

// The write path's commit protocol (issue 18):
//
//   - a read descriptor held beside a rewrite never holds its commit back:
//     when close(2) returns the change is committed, a reopen reads it, and
//     the opener's next append is not a conflict (TestCloseToOpenBesideReader);
//   - two owners appending to one log: every line lands, none becomes a
//     conflict copy behind the writer's back (TestTwoOwnersAppend);

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// conflictCopies lists the conflict and recovery copies in dir.
func conflictCopies(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.realm-*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestCloseToOpenBesideReader: `echo new > g` while the same shell holds g
// open for reading commits when its close returns: the next `cat` reads
// new, and `echo more >> g` appends to new. Before, the reader's
// descriptor made the opener's close commit nothing, the commit came with
// the kernel's RELEASE after close(2) had returned, and the next open met
// a file "changed from outside the mount": g stayed new and old\nmore went
// to a conflict copy.
func TestCloseToOpenBesideReader(t *testing.T) {
	t.Parallel()
	m := mount(t)
	const rounds = 20
	for i := range rounds {
		g := fmt.Sprintf("g%d", i)
		out := run(t, m.Dir, nil, "bash", "-c",
			`g=$1; echo old > $g; exec 3<$g; echo new > $g; cat $g; exec 3<&-; echo more >> $g; cat $g`, "bash", g)
		if want := "new\nnew\nmore\n"; out != want {
			t.Errorf("round %d: the shell read %q, want %q", i, out, want)
		}
		if b, err := os.ReadFile(m.BackingPath(g)); err != nil || string(b) != "new\nmore\n" {
			t.Errorf("round %d: BACKING/%s = %q (%v), want %q", i, g, b, err, "new\nmore\n")
		}
	}
	if c := conflictCopies(t, m.BackingPath()); len(c) > 0 {
		t.Errorf("conflict copies made: %v", c)
	}
}

// TestTwoOwnersAppend: two sessions (lockowner=session) append 100 lines
// each to one log, one `echo >>` per line. Every line is in the log, or its
// echo failed; none is hidden in a conflict copy. Before, each commit gave
// the log a new inode, the other owner's next open found no lock for it,
// and its commit met a file "changed from outside the mount".
func TestTwoOwnersAppend(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=session"))
	const n = 100
	loop := func(tag string) string {
		return fmt.Sprintf(`for i in $(seq %d); do echo %s$i >> s.log || echo FAIL %s$i >&2; done`, n, tag, tag)
	}
	out := run(t, m.Dir, nil, "bash", "-c", loop("A")+" 2>a.err & setsid bash -c '"+loop("B")+" 2>b.err'; wait")
	_ = out
	b, err := os.ReadFile(m.BackingPath("s.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	got := map[string]bool{}
	for _, l := range lines {
		got[l] = true
	}
	failed := map[string]bool{}
	for _, e := range []string{"a.err", "b.err"} {
		eb, _ := os.ReadFile(m.BackingPath(e))
		for _, l := range strings.Split(string(eb), "\n") {
			if w, ok := strings.CutPrefix(l, "FAIL "); ok {
				failed[w] = true
			}
		}
	}
	missing := 0
	for _, tag := range []string{"A", "B"} {
		for i := 1; i <= n; i++ {
			w := fmt.Sprintf("%s%d", tag, i)
			if !got[w] && !failed[w] {
				missing++
			}
		}
	}
	t.Logf("%d lines in the log, %d echos failed", len(lines), len(failed))
	if missing > 0 {
		t.Errorf("%d lines neither in the log nor reported failed", missing)
	}
	if len(failed) > 0 {
		t.Errorf("%d appends failed; two owners' appends both proceed, as natively", len(failed))
	}
	if c := conflictCopies(t, m.BackingPath()); len(c) > 0 {
		t.Errorf("%d conflict copies made: %v", len(c), c[:min(len(c), 3)])
	}
}
