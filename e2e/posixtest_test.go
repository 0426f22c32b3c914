package e2e

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixDirEnv and posixCaseEnv hand a posixtest case and its directory to a
// child process running TestPosixtestChild.
const (
	posixDirEnv  = "REALM_E2E_POSIX_DIR"
	posixCaseEnv = "REALM_E2E_POSIX_CASE"
)

// posixOutcome is how one posixtest case ended in a child process.
type posixOutcome struct {
	passed  bool
	skipped bool
	output  string
}

// TestPosixtest runs every case of go-fuse's posixtest suite against the
// mount and against a native directory on the same filesystem, each case in
// its own child process (a case that hangs or crashes cannot take the others
// with it, and a native failure does not fail this test). A case that fails
// on the mount but passes natively fails the test. The natively failing
// cases are logged (the README names them).
func TestPosixtest(t *testing.T) {
	t.Parallel()
	m := mount(t)
	native := filepath.Join(m.Root, "native") // same filesystem as BACKING
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(posixtest.All))
	type job struct{ name, where, dir string }
	var jobs []job
	for _, name := range names {
		jobs = append(jobs, job{name, "native", native}, job{name, "mount", m.Dir})
	}
	results := map[string]posixOutcome{} // name + "/" + where
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := runPosixCase(j.name, j.dir)
			mu.Lock()
			results[j.name+"/"+j.where] = o
			mu.Unlock()
		}()
	}
	wg.Wait()

	var nativeFails, bothFail, skipped []string
	for _, name := range names {
		n, mo := results[name+"/native"], results[name+"/mount"]
		if n.skipped {
			skipped = append(skipped, name+" (native)")
		}
		if mo.skipped {
			skipped = append(skipped, name+" (mount)")
		}
		switch {
		case !n.passed && !mo.passed:
			nativeFails = append(nativeFails, name)
			bothFail = append(bothFail, name)
		case !n.passed:
			nativeFails = append(nativeFails, name)
		case !mo.passed:
			if d, ok := posixByDesign[name]; ok && strings.Contains(mo.output, d.mustSay) {
				t.Logf("posixtest %s fails on the mount by design: %s", name, d.why)
				continue
			}
			t.Errorf("posixtest %s fails on the mount but passes natively:\n%s", name, tail(mo.output, 3000))
		}
	}
	t.Logf("posixtest: %d cases; failing natively (ext4): %v", len(names), nativeFails)
	t.Logf("posixtest: failing both natively and on the mount: %v", bothFail)
	if len(skipped) > 0 {
		t.Logf("posixtest: skipped somewhere: %v", skipped)
	}
	for _, name := range nativeFails {
		t.Logf("native failure of %s:\n%s", name, tail(results[name+"/native"].output, 800))
	}
	for _, name := range bothFail {
		t.Logf("mount failure of %s:\n%s", name, tail(results[name+"/mount"].output, 800))
	}
}

// posixByDesign are cases that fail on the mount because realm refuses what
// they do, on purpose; each must fail with the given text in its output (so
// a different failure is still caught), and is logged, not failed.
var posixByDesign = map[string]struct{ why, mustSay string }{
	"SymlinkReadlink": {
		why:     "creates a symlink to the absolute /foobar, which realm refuses (PATH_ESCAPE, EACCES)",
		mustSay: "permission denied",
	},
	// Natively its outcome depends on the scheduling of a race it sets up
	// in one directory (it is meant for a shuffler in the backing dir).
	"OpenSymlinkRace": {
		why:     "its shuffler creates a symlink to the absolute /etc/passwd through the mount, which realm refuses",
		mustSay: "shuffler: Symlink: permission denied",
	},
}

// runPosixCase runs one case in a child process in a fresh subdirectory.
func runPosixCase(name, dir string) posixOutcome {
	sub := filepath.Join(dir, name)
	if err := os.Mkdir(sub, 0o755); err != nil {
		return posixOutcome{output: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, selfBin, "-test.run=^TestPosixtestChild$", "-test.v", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), posixDirEnv+"="+sub, posixCaseEnv+"="+name)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	o := posixOutcome{output: string(out)}
	var exit *exec.ExitError
	switch {
	case err == nil:
		o.passed = !strings.Contains(o.output, "no tests to run")
		o.skipped = strings.Contains(o.output, "--- SKIP")
	case errors.As(err, &exit):
	default:
		o.output += "\n" + err.Error()
	}
	_ = os.RemoveAll(sub)
	return o
}

// TestPosixtestChild is one posixtest case; it runs only as TestPosixtest's child.
func TestPosixtestChild(t *testing.T) {
	dir, name := os.Getenv(posixDirEnv), os.Getenv(posixCaseEnv)
	if dir == "" {
		t.Skip("runs only as a child process of TestPosixtest")
	}
	fn, ok := posixtest.All[name]
	if !ok {
		t.Fatalf("no posixtest case %q", name)
	}
	fn(t, dir)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
