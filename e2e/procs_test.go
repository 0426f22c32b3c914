package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestOneProc: a mount with -o procs=1 runs the daemon's Go code on one P
// (its mounted line says procs=1) and still serves what one P could
// stall, were a request to wait for a P another holds in a long system
// call: four shells writing and fsyncing files at once, each file whole
// after, and SQLite's WAL shared by two owners (TestSQLiteWALTwoOwners).
func TestOneProc(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3", "sqlite3", "setsid", "dd")
	m := mount(t, Opts("lockowner=session,procs=1"))
	if !strings.Contains(readFile(t, m.LogFile), " procs=1 ") {
		t.Fatalf("the daemon's mounted line does not say procs=1:\n%s", m.logTail())
	}

	const writers, saves = 4, 40
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			script := `i=1; while [ $i -le $2 ]; do printf 'writer %s save %s\n' "$1" $i | dd of="$3" conv=fsync status=none || exit 1; i=$((i+1)); done`
			out, err := exec.Command("sh", "-c", script, "sh", fmt.Sprint(w), fmt.Sprint(saves), m.Path(fmt.Sprintf("w%d", w))).CombinedOutput()
			if err != nil {
				errs[w] = fmt.Errorf("writer %d: %v: %s", w, err, out)
			}
		})
	}
	wg.Wait()
	for w := range writers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		if got, want := readFile(t, m.BackingPath(fmt.Sprintf("w%d", w))), fmt.Sprintf("writer %d save %d\n", w, saves); got != want {
			t.Errorf("w%d holds %q, want %q", w, got, want)
		}
	}
	sqliteWALTwoOwners(t, m)
}

// TestAdaptiveProcs: a mount that asks for no Ps runs at one P while
// requests come one at a time, raises its Ps while four writers that
// fsync overlap, and returns to one P at the requests after they stop,
// each change in its log. Where fusectl's count cannot be read, or Go gives the daemon one P
// anyway, the log says so and the Ps stay as Go gave them.
func TestAdaptiveProcs(t *testing.T) {
	t.Parallel()
	requireTool(t, "dd")
	m := mount(t)
	mounted := waitForLine(t, m.LogFile, "msg=mounted")
	if runtime.NumCPU() == 1 {
		waitForLine(t, m.LogFile, `msg="procs: fixed"`, "procs=1")
		return
	}
	if _, err := os.Stat("/sys/fs/fuse/connections"); err != nil {
		waitForLine(t, m.LogFile, `msg="procs: not adapted`)
		return
	}
	if !strings.Contains(mounted, " procs=1 ") {
		t.Fatalf("the mounted line does not say procs=1:\n%s", m.logTail())
	}
	stop := m.Path("stop")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			script := `while [ ! -e "$1" ]; do echo x | dd of="$2" conv=fsync status=none || exit 1; done`
			if out, err := exec.Command("sh", "-c", script, "sh", stop, m.Path(fmt.Sprintf("w%d", w))).CombinedOutput(); err != nil {
				t.Errorf("writer %d: %v: %s", w, err, out)
			}
		})
	}
	raised := waitForLine(t, m.LogFile, "msg=procs ", "waiting_mean=")
	writeFile(t, stop, "")
	wg.Wait()
	if strings.Contains(raised, " procs=1 ") {
		t.Fatalf("the first change was not a raise: %s", raised)
	}
	// The samples ride on requests (no timer wakes the daemon): the Ps
	// return at the requests that come after the writers, which list the
	// root, a request the kernel never answers from its cache.
	done := make(chan struct{})
	var lister sync.WaitGroup
	lister.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				os.ReadDir(m.Path(""))
			}
		}
	})
	waitForLine(t, m.LogFile, "msg=procs procs=1 ")
	close(done)
	lister.Wait()
}
