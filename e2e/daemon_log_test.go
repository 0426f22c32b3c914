package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestDaemonLogBoundedPerKind: a write the temp cannot take (pwrite past
// the backing filesystem's largest file: EFBIG) fails its commit, which the
// daemon logs, as root, where no bound of the mount gauges it. An agent's
// loop of open, pwrite and close wrote one line a failure (7.7 MB in two
// seconds with a long path; an adversarial review, 2026-12-04). The daemon
// writes at most internal/ratelog's burst of one kind in any window's
// span, and the next line says how many were left out. (CI, 2026-12-05:
// the loop ran across a minute's turn, and a limiter of the clock's
// windows wrote its burst on each side.)
func TestDaemonLogBoundedPerKind(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=session"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "x\n")
	}))
	before := logLines(t, m.LogFile)
	const n = 300
	for i := 0; i < n; i++ {
		f, err := os.OpenFile(m.Path("f"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, werr := f.WriteAt([]byte{'y'}, 1<<50)
		cerr := f.Close()
		if i == 0 && (werr == nil || cerr == nil) {
			t.Fatalf("a pwrite at 1 PiB: %v, its close: %v; want both to fail", werr, cerr)
		}
	}
	added := logLines(t, m.LogFile)[len(before):]
	failed := 0
	for _, l := range added {
		if strings.Contains(l, "commit failed") {
			failed++
		}
	}
	t.Logf("%d failed commits: %d lines in the daemon log, %d of them \"commit failed\"", n, len(added), failed)
	if failed == 0 || failed > 20 {
		t.Errorf("%d failed commits logged %d \"commit failed\" lines, want 1 to 20 (the burst a minute)", n, failed)
	}
	if len(added) > 60 {
		t.Errorf("%d failed commits added %d lines to the daemon log:\n%s", n, len(added), strings.Join(added[:60], "\n"))
	}
}

// logLines are the lines of the daemon log at path.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}
