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

	"golang.org/x/sys/unix"
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

// TestStateLockRefusesPlantedSymlink: a state dir another user owns (one who
// made /tmp/realm first) is refused before anything in it is opened, so a
// lock symlink planted there cannot make root's realmctl truncate the file
// it points to.
func TestStateLockRefusesPlantedSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the state dir to another user")
	}
	state := filepath.Join(t.TempDir(), "realm")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("root's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(state, "lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(state, "lock"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	l, err := LockStateDir(state, time.Second)
	if err == nil {
		l.Unlock()
	}
	if data, rerr := os.ReadFile(victim); rerr != nil || string(data) != "root's data\n" {
		t.Fatalf("LockStateDir followed the planted lock symlink: %s holds %q (%v)", victim, data, rerr)
	}
	if !errors.Is(err, ErrUnsafeStateDir) || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err = %v, want the unsafe state dir %s named with its owner", err, state)
	}
}

// TestStateLockRefusesUnsafeDirs: each way a state dir can be unsafe is
// refused with a message naming the path and what is wrong, and nothing
// the lock would name is truncated.
func TestStateLockRefusesUnsafeDirs(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, state string) string // the path the error names
		want  string
	}{
		{"group-writable dir", func(t *testing.T, state string) string {
			must(t, os.Chmod(state, 0o770))
			return state
		}, "writable by its group or others (mode 0770)"},
		{"world-writable sessions", func(t *testing.T, state string) string {
			p := filepath.Join(state, "sessions")
			must(t, os.Mkdir(p, 0o700))
			must(t, os.Chmod(p, 0o777))
			return p
		}, "writable by its group or others"},
		{"mounts is a symlink", func(t *testing.T, state string) string {
			p := filepath.Join(state, "mounts")
			must(t, os.Symlink(t.TempDir(), p))
			return p
		}, "is not a directory"},
		{"lock is a symlink in our own dir", func(t *testing.T, state string) string {
			p := filepath.Join(state, "lock")
			must(t, os.Symlink(victim, p))
			return p
		}, "it is a symlink"},
		{"lock is a hard link", func(t *testing.T, state string) string {
			p := filepath.Join(state, "lock")
			must(t, os.Link(victim, p))
			return p
		}, "2 hard links"},
		{"lock is a fifo", func(t *testing.T, state string) string {
			p := filepath.Join(state, "lock")
			must(t, syscallMkfifo(p))
			return p
		}, "not a regular file"},
		{"state dir is a file", func(t *testing.T, state string) string {
			p := filepath.Join(state, "f")
			must(t, os.WriteFile(p, nil, 0o600))
			return p
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			must(t, os.Mkdir(state, 0o700))
			named := tt.setup(t, state)
			dir := state
			if tt.want == "" {
				dir = named
			}
			l, err := LockStateDir(dir, 100*time.Millisecond)
			if err == nil {
				l.Unlock()
				t.Fatal("an unsafe state dir was locked")
			}
			if !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want %s named and %q", err, named, tt.want)
			}
			if data, _ := os.ReadFile(victim); string(data) != "data\n" {
				t.Fatalf("victim truncated: %q", data)
			}
		})
	}
}

// TestStateLockSafeDirs: the state dir made here, a 0755 one, and one
// reached through the user's own symlink are all used.
func TestStateLockSafeDirs(t *testing.T) {
	made := filepath.Join(t.TempDir(), "a", "b")
	open := t.TempDir()
	must(t, os.Chmod(open, 0o755))
	must(t, os.Mkdir(filepath.Join(open, "sessions"), 0o700))
	must(t, os.Mkdir(filepath.Join(open, "mounts"), 0o755))
	link := filepath.Join(t.TempDir(), "link")
	must(t, os.Symlink(open, link))
	for _, dir := range []string{made, open, link} {
		l, err := LockStateDir(dir, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		l.Unlock()
	}
	if st, err := os.Stat(made); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("made state dir: %v, %v", st, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func syscallMkfifo(path string) error { return unix.Mkfifo(path, 0o600) }

// TestStateLockRefusesUnsafeParents: a state dir beneath a directory
// another user could change (theirs, or writable by them and not sticky),
// or reached through their symlink, is refused before anything is made
// or opened in it, with a message naming that directory.
func TestStateLockRefusesUnsafeParents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a parent to another user")
	}
	const other = 65534
	tests := []struct {
		name  string
		setup func(t *testing.T, top string) (state, named string)
		want  string
	}{
		{"parent owned by another user", func(t *testing.T, top string) (string, string) {
			p := filepath.Join(top, "theirs")
			must(t, os.Mkdir(p, 0o755))
			must(t, os.Chown(p, other, other))
			return filepath.Join(p, "sub", "state"), p
		}, "owned by uid 65534"},
		{"parent world-writable, not sticky", func(t *testing.T, top string) (string, string) {
			p := filepath.Join(top, "open")
			must(t, os.Mkdir(p, 0o755))
			must(t, os.Chmod(p, 0o777))
			return filepath.Join(p, "state"), p
		}, "without the sticky bit (mode 0777)"},
		{"parent group-writable, not sticky", func(t *testing.T, top string) (string, string) {
			p := filepath.Join(top, "group")
			must(t, os.Mkdir(p, 0o755))
			must(t, os.Chmod(p, 0o775))
			must(t, os.Mkdir(filepath.Join(p, "state"), 0o700))
			return filepath.Join(p, "state"), p
		}, "without the sticky bit (mode 0775)"},
		{"symlink on the way owned by another user", func(t *testing.T, top string) (string, string) {
			target := filepath.Join(top, "target")
			must(t, os.Mkdir(target, 0o755))
			link := filepath.Join(top, "link")
			must(t, os.Symlink(target, link))
			must(t, os.Lchown(link, other, other))
			return filepath.Join(link, "state"), link
		}, "owned by uid 65534"},
		{"root's symlink into another user's dir", func(t *testing.T, top string) (string, string) {
			theirs := filepath.Join(top, "theirs")
			must(t, os.Mkdir(theirs, 0o755))
			must(t, os.Mkdir(filepath.Join(theirs, "d"), 0o755))
			must(t, os.Chown(theirs, other, other))
			link := filepath.Join(top, "link")
			must(t, os.Symlink(filepath.Join(theirs, "d"), link))
			return filepath.Join(link, "state"), theirs
		}, "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := t.TempDir()
			must(t, os.Chmod(top, 0o755))
			state, named := tt.setup(t, top)
			existed := exists(state)
			l, err := LockStateDir(state, 100*time.Millisecond)
			if err == nil {
				l.Unlock()
				t.Fatal("a state dir beneath an unsafe parent was locked")
			}
			if !errors.Is(err, ErrUnsafeStateDir) || !strings.Contains(err.Error(), named+":") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want %s named and %q", err, named, tt.want)
			}
			if !existed && exists(state) {
				t.Errorf("%s was made beneath the unsafe parent", state)
			}
			if existed && exists(filepath.Join(state, "lock")) {
				t.Errorf("a lock was made in %s", state)
			}
		})
	}
}

// TestStateLockStickyParent: a state dir of one's own in a sticky
// world-writable directory (as in /tmp) is used: nobody else may rename
// or remove it there.
func TestStateLockStickyParent(t *testing.T) {
	sticky := t.TempDir()
	must(t, os.Chmod(sticky, 0o777|os.ModeSticky))
	l, err := LockStateDir(filepath.Join(sticky, "realm"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
