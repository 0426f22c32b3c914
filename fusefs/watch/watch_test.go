package watch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// sink records what the watcher reports.
type sink struct {
	mu      sync.Mutex
	changes []string
	lost    int
}

func (s *sink) Changed(dir string, name string, names, content bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := ""
	if names {
		kind += "n"
	}
	if content {
		kind += "c"
	}
	s.changes = append(s.changes, dir+"/"+name+" "+kind)
}

func (s *sink) Lost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost++
}

// await waits until the sink heard want (as "dir/name kinds", kinds
// containing what want's do).
func (s *sink) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, c := range s.changes {
			if c == want || (len(c) > len(want) && c[:len(want)] == want) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Fatalf("no %q among %q", want, s.changes)
}

// watchRoot watches root (its fd returned, closed at the test's end) for
// s, with fanotify if fan, else inotify; the test is skipped where the
// watcher comes up with the other. The watcher is closed at the test's end.
func watchRoot(t *testing.T, root string, s *sink, fan bool) (*Watcher[string], int) {
	t.Helper()
	rootFd, err := dirfd.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirfd.Close(rootFd) })
	w, err := start("root", rootFd, s, t.Logf, fan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	if want := map[bool]string{true: "fanotify", false: "inotify"}[fan]; w.Kind() != want {
		t.Skipf("watching with %s, not %s", w.Kind(), want)
	}
	return w, rootFd
}

// TestWatcherReportsOthersChanges: a change by another process, in the
// root and in a directory added later, reaches the sink by the
// directory's key and the child's name; a removed directory's changes do
// not. With fanotify (as root) and inotify both.
func TestWatcherReportsOthersChanges(t *testing.T) {
	for _, fan := range []bool{true, false} {
		t.Run(map[bool]string{true: "fanotify", false: "inotify"}[fan], func(t *testing.T) { testWatcher(t, fan) })
	}
}

func testWatcher(t *testing.T, tryFan bool) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var s sink
	w, rootFd := watchRoot(t, root, &s, tryFan)
	subFd, err := dirfd.OpenDir(rootFd, "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(subFd)
	if !w.Add("sub", subFd, func() string { return "sub" }) {
		t.Fatal("sub is not watched")
	}
	// Another process: fanotify skips the daemon's own changes.
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("touch", filepath.Join(root, "a"))
	s.await(t, "root/a n")
	run("sh", "-c", "echo x >> "+filepath.Join(root, "sub", "b"))
	s.await(t, "sub/b n")
	run("sh", "-c", "echo y >> "+filepath.Join(root, "sub", "b"))
	s.await(t, "sub/b c")
	w.Remove("sub", subFd)
	s.mu.Lock()
	s.changes = nil
	s.mu.Unlock()
	run("touch", filepath.Join(root, "sub", "c"), filepath.Join(root, "d"))
	s.await(t, "root/d n")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.changes {
		if c[:4] == "sub/" {
			t.Errorf("a removed directory's change reported: %q", c)
		}
	}
	if s.lost != 0 {
		t.Errorf("%d losses", s.lost)
	}
}

// TestAddFails: a directory that cannot be watched is not, and the first
// such is logged by its path, once.
func TestAddFails(t *testing.T) {
	rootFd, err := dirfd.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(rootFd)
	var s sink
	var logs []string
	w, err := New("root", rootFd, &s, func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, dir := range []string{"a", "b"} {
		if w.Add(dir, -1, func() string { return "dir " + dir }) {
			t.Errorf("%s watched by fd -1", dir)
		}
	}
	if len(logs) != 1 || !strings.HasPrefix(logs[0], `watch "dir a": `) || !strings.HasSuffix(logs[0], "; changes made in BACKING behind the mount show there after the short cache timeouts") {
		t.Errorf("logged %q, want the first failure's line", logs)
	}
}

// TestOwnBurstThenOthers (fanotify): the daemon's own changes, a burst of
// them, are not reported and make the watcher pause (ownPause); a change
// by another process made in the pause is still reported, and so is one
// made long after it. Close ends a watcher in its pause.
func TestOwnBurstThenOthers(t *testing.T) {
	root := t.TempDir()
	var s sink
	watchRoot(t, root, &s, true)
	for i := range 50 { // this process is the daemon: its own changes
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("own%d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"other1", "other2"} {
		if out, err := exec.Command("touch", filepath.Join(root, name)).CombinedOutput(); err != nil {
			t.Fatalf("touch: %v: %s", err, out)
		}
		s.await(t, "root/"+name+" n")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.changes {
		if strings.HasPrefix(c, "root/own") {
			t.Errorf("the daemon's own change reported: %q", c)
		}
	}
}
