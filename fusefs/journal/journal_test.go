package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/rootbind"
)

// backing is a BACKING for a test: its path and its root fd.
type backing struct {
	path string
	root int
}

func newBacking(t testing.TB) *backing {
	t.Helper()
	p := t.TempDir()
	fd, err := dirfd.OpenRoot(p)
	must(t, err)
	t.Cleanup(func() { dirfd.Close(fd) })
	return &backing{path: p, root: fd}
}

// jpath is the path of name inside the default journal directory.
func (b *backing) jpath(name ...string) string {
	return filepath.Join(append([]string{b.path, DirName}, name...)...)
}

func (b *backing) write(t testing.TB, rel, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(filepath.Join(b.path, rel)), 0o755))
	must(t, os.WriteFile(filepath.Join(b.path, rel), []byte(data), 0o644))
}

func (b *backing) stat(t testing.TB, rel string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(b.path, rel), &st))
	return &st
}

// pathFd opens rel beneath b as an O_PATH fd, closed at the test's end.
func (b *backing) pathFd(t testing.TB, rel string) int {
	t.Helper()
	fd, err := unix.Open(filepath.Join(b.path, rel), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// dirFd opens the directory rel beneath b as an O_PATH fd.
func (b *backing) dirFd(t testing.TB, rel string) int {
	t.Helper()
	fd, err := unix.Open(filepath.Join(b.path, rel), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// testSegmentSize is the segments' size where a test does not set one:
// a segment is preallocated, and read whole at Open, which under the race
// detector costs a 4 MiB one about 0.2 s (most of make test's journal
// tests).
const testSegmentSize = 256 << 10

// open opens b's default journal, closed at the test's end.
func (b *backing) open(t testing.TB, opts Options) *Journal {
	t.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = testSegmentSize
	}
	j, err := Open(b.root, DefaultDir, opts)
	must(t, err)
	t.Cleanup(func() { j.Close() })
	return j
}

// clock is a test's clock: it moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	must(t, err)
	return fi.Mode()
}

// TestLayout: Open makes the directory as the design lays it out, with
// its modes, and a journal directory another made too open is narrowed.
func TestLayout(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	for _, tc := range []struct {
		name string
		want os.FileMode
	}{
		{"", os.ModeDir | 0o700},
		{logName, os.ModeDir | 0o700},
		{keptName, os.ModeDir | 0o700},
		{lockName, 0o600},
		{gitignoreName, 0o644},
	} {
		if got := mode(t, b.jpath(tc.name)); got != tc.want {
			t.Errorf("%s/%s: mode %v, want %v", DirName, tc.name, got, tc.want)
		}
	}
	if got, _ := os.ReadFile(b.jpath(gitignoreName)); string(got) != "*\n" {
		t.Errorf(".gitignore holds %q", got)
	}
	if got, _ := os.ReadFile(b.jpath(lockName)); strings.TrimSpace(string(got)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("LOCK holds %q, want our pid", got)
	}
	if _, err := os.Stat(b.jpath(jdir.Pruned)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pruned exists before any prune: %v", err)
	}
	c, err := j.Begin(Record{Op: OpCreate, Path: "a"}, NoKeep)
	must(t, err)
	must(t, c.Done(nil))
	if _, err := os.Stat(b.jpath(logName, segmentName(1))); err != nil {
		t.Errorf("the first segment: %v", err)
	}
	must(t, j.Close())

	must(t, os.Chmod(b.jpath(), 0o755))
	must(t, os.WriteFile(b.jpath(gitignoreName), []byte("mine\n"), 0o644))
	b.open(t, Options{})
	if got := mode(t, b.jpath()); got != os.ModeDir|0o700 {
		t.Errorf("reopened: mode %v, want 0700", got)
	}
	if got, _ := os.ReadFile(b.jpath(gitignoreName)); string(got) != "mine\n" {
		t.Errorf("reopened: an existing .gitignore was rewritten: %q", got)
	}
}

// TestGivenDir: a journal directory given by fd is laid out as the
// default one is, and nothing is made beneath BACKING's root.
func TestGivenDir(t *testing.T) {
	b := newBacking(t)
	dir := filepath.Join(b.path, "elsewhere")
	must(t, os.Mkdir(dir, 0o750))
	fd := b.dirFd(t, "elsewhere")
	j, err := Open(b.root, fd, Options{})
	must(t, err)
	defer j.Close()
	for _, name := range []string{logName, keptName, lockName, gitignoreName, rootbind.Name} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Lstat(b.jpath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s made beside a given directory: %v", DirName, err)
	}
	if got := mode(t, dir); got != os.ModeDir|0o750 {
		t.Errorf("a given directory's mode changed to %v", got)
	}
}

// TestGivenDirBoundToItsBacking: a journal directory given by fd records
// one BACKING, the one it was first opened for: opened for another
// directory (BACKING's path leading elsewhere now), to write or to read,
// it is refused and left as it was; for its own, taken again.
func TestGivenDirBoundToItsBacking(t *testing.T) {
	b := newBacking(t)
	must(t, os.Mkdir(filepath.Join(b.path, "elsewhere"), 0o700))
	must(t, os.Mkdir(filepath.Join(b.path, "other"), 0o700))
	fd := b.dirFd(t, "elsewhere")
	j, err := Open(b.root, fd, Options{})
	must(t, err)
	must(t, j.Close())
	bound, err := os.ReadFile(filepath.Join(b.path, "elsewhere", rootbind.Name))
	must(t, err)
	other, err := dirfd.OpenRoot(filepath.Join(b.path, "other"))
	must(t, err)
	defer dirfd.Close(other)
	if j, err := Open(other, fd, Options{}); err == nil {
		j.Close()
		t.Fatal("a journal bound to one BACKING was opened for another")
	} else if !strings.Contains(err.Error(), "another BACKING") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	if r, err := OpenReader(other, fd); err == nil {
		r.Close()
		t.Error("a journal bound to one BACKING was read for another")
	}
	if now, _ := os.ReadFile(filepath.Join(b.path, "elsewhere", rootbind.Name)); string(now) != string(bound) {
		t.Errorf("the refused open rebound the journal: %q, was %q", now, bound)
	}
	j, err = Open(b.root, fd, Options{})
	must(t, err)
	must(t, j.Close())
}

// TestSecondOpenRefused: one writer at a time, and the refusal names it.
func TestSecondOpenRefused(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	_, err := Open(b.root, DefaultDir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open: %v, want ErrLocked", err)
	}
	t.Logf("refused: %v", err)
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal %q does not name %s", err, want)
	}
	must(t, j.Close())
	j2, err := Open(b.root, DefaultDir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	j2.Close()
}

// TestNotOwnedRefused: a journal directory another user owns is refused
// (its owner could read the versions kept there).
func TestNotOwnedRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	b := newBacking(t)
	must(t, os.Mkdir(b.jpath(), 0o755))
	must(t, os.Chmod(b.jpath(), 0o755))
	must(t, os.Chown(b.jpath(), 12345, 12345))
	_, err := Open(b.root, DefaultDir, Options{})
	if err == nil || !strings.Contains(err.Error(), "uid 12345") {
		t.Errorf("Open of a directory uid 12345 owns: %v", err)
	}
	if got := mode(t, b.jpath()); got != os.ModeDir|0o755 {
		t.Errorf("the refused directory's mode changed to %v", got)
	}
	if ents, _ := os.ReadDir(b.jpath()); len(ents) != 0 {
		t.Errorf("the refused directory was written: %v", ents)
	}
}

// TestDirOnAnotherFilesystem: a journal directory that no link from
// BACKING can reach is refused, naming both: on another filesystem
// (st_dev), or on another mount of BACKING's (a bind).
func TestDirOnAnotherFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs and a bind needs root")
	}
	b := newBacking(t)
	for _, tc := range []struct {
		name  string
		mount func(dst string) error
		want  []string
	}{
		{"tmpfs", func(dst string) error { return unix.Mount("realm-journal-test", dst, "tmpfs", 0, "size=1m") },
			[]string{"device", "BACKING on"}},
		{"bind", func(dst string) error {
			src := filepath.Join(b.path, "bindsrc")
			if err := os.MkdirAll(src, 0o700); err != nil {
				return err
			}
			return unix.Mount(src, dst, "", unix.MS_BIND, "")
		}, []string{"mount", "BACKING on mount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			if err := tc.mount(dst); err != nil {
				t.Skipf("cannot mount here: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
			fd, err := dirfd.OpenRoot(dst)
			must(t, err)
			defer dirfd.Close(fd)
			j, err := Open(b.root, fd, Options{})
			if err == nil {
				j.Close()
				t.Fatal("a journal directory on another mount was taken")
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not say %q", err, w)
				}
			}
			if ents, _ := os.ReadDir(dst); len(ents) != 0 {
				t.Errorf("the refused directory was written: %v", ents)
			}
		})
	}
}
