package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The helper process holds the state dir's lock until its stdin closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("REAPER_TEST_HOLD_LOCK"); dir != "" {
		l, err := LockStateDir(dir, time.Second)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		buf := make([]byte, 1)
		os.Stdin.Read(buf)
		l.Unlock()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestStateLockTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REAPER_TEST_HOLD_LOCK="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	if got := strings.TrimSpace(string(buf[:n])); got != "locked" {
		t.Fatalf("helper said %q", got)
	}

	start := time.Now()
	_, err := LockStateDir(dir, 300*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("gave up after %s, before the wait", waited)
	}
	if want := fmt.Sprintf("pid %d", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not name the holder (%s)", err, want)
	}

	// Released while we wait: we get it. The holder lets go once this
	// process has the lock file open again, that is, once the LockStateDir
	// below is under way (the one above closed its descriptor).
	lock := filepath.Join(dir, "lock")
	go func() {
		defer stdin.Close()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !openHere(lock); {
			time.Sleep(time.Millisecond)
		}
	}()
	l, err := LockStateDir(dir, 10*time.Second)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l.Unlock()
	l.Unlock()
}

// openHere reports whether a descriptor of this process names the file at
// path.
func openHere(path string) bool {
	want, err := os.Stat(path)
	if err != nil {
		return false
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if st, err := os.Stat(filepath.Join("/proc/self/fd", fd.Name())); err == nil && os.SameFile(st, want) {
			return true
		}
	}
	return false
}
