package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// created opens rel for writing as a new file (O_EXCL) through the mount
// and writes data into it, leaving it open.
func created(t *testing.T, m *Mount, rel, data string) *os.File {
	t.Helper()
	f, err := os.OpenFile(m.Path(rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	return f
}

// closeFile closes f, which must succeed.
func closeFile(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", f.Name(), err)
	}
}

// TestCreatedFileUnpublished: a file created through the mount has no
// name in BACKING until its close publishes it, whole (writeengine
// newfile.go); whatever else reaches it or its name first makes it real,
// the empty file a create makes, and the write goes on as before. Each
// case leaves BACKING as the same steps natively would, and no temp.
func TestCreatedFileUnpublished(t *testing.T) {
	t.Parallel()
	requireTool(t, "setsid", "cat")
	m := mount(t, Opts("lockowner=session"))
	for _, tc := range []struct {
		name string
		// contact runs while f (named rel) is open with "part" written,
		// and says what BACKING holds at rel after it ("" for nothing).
		contact func(t *testing.T, rel string, f *os.File) (backing string)
		// after is what the name holds once f is closed, and where.
		after, at string
	}{
		{"nothing reaches it", func(t *testing.T, rel string, f *os.File) string {
			return ""
		}, "part whole", ""},
		{"its owner's stat", func(t *testing.T, rel string, f *os.File) string {
			if fi, err := os.Stat(m.Path(rel)); err != nil || fi.Size() != 4 {
				t.Errorf("stat by its owner: %v, %v; want its own 4 bytes", fi, err)
			}
			return ""
		}, "part whole", ""},
		{"its owner's fchmod and futimens (tar's)", func(t *testing.T, rel string, f *os.File) string {
			if err := f.Chmod(0o600); err != nil {
				t.Fatal(err)
			}
			tv := []unix.Timeval{{Sec: 1e9}, {Sec: 1e9}}
			if err := unix.Futimes(int(f.Fd()), tv); err != nil {
				t.Fatal(err)
			}
			if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 || fi.ModTime().Unix() != 1e9 {
				t.Errorf("fstat after them: %v, %v", fi, err)
			}
			return ""
		}, "part whole", ""},
		{"a listing", func(t *testing.T, rel string, f *os.File) string {
			ents, err := os.ReadDir(filepath.Dir(m.Path(rel)))
			if err != nil || !hasEntry(ents, filepath.Base(rel)) {
				t.Errorf("the listing misses %s: %v", rel, err)
			}
			return "empty"
		}, "part whole", ""},
		{"another owner's read", func(t *testing.T, rel string, f *os.File) string {
			out, err := exec.Command("setsid", "cat", m.Path(rel)).CombinedOutput()
			if err != nil || len(out) != 0 {
				t.Errorf("another owner's cat: %q, %v; want the empty file", out, err)
			}
			return "empty"
		}, "part whole", ""},
		{"mv by its owner", func(t *testing.T, rel string, f *os.File) string {
			if err := os.Rename(m.Path(rel), m.Path(rel+".moved")); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "part whole", ".moved"},
		{"rm by its owner", func(t *testing.T, rel string, f *os.File) string {
			if err := os.Remove(m.Path(rel)); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "", ""},
		{"mv of a name beside it", func(t *testing.T, rel string, f *os.File) string {
			other := filepath.Join(filepath.Dir(m.Path(rel)), "other")
			if err := os.WriteFile(other, []byte("o"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, other+"2"); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "part whole", ""},
		{"mv and rmdir of a directory beside it", func(t *testing.T, rel string, f *os.File) string {
			sub := filepath.Join(filepath.Dir(m.Path(rel)), "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(sub, sub+"2"); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(sub + "2"); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "part whole", ""},
		{"rmdir of its directory", func(t *testing.T, rel string, f *os.File) string {
			err := os.Remove(filepath.Dir(m.Path(rel)))
			if !errors.Is(err, syscall.ENOTEMPTY) {
				t.Errorf("rmdir of the directory of %s: %v, want ENOTEMPTY", rel, err)
			}
			return "empty"
		}, "part whole", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := strings.ReplaceAll(tc.name, " ", "-")
			if err := os.Mkdir(m.Path(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			rel := dir + "/f"
			f := created(t, m, rel, "part")
			assertAbsent(t, m.BackingPath(rel))
			want := tc.contact(t, rel, f)
			switch want {
			case "":
				if _, err := os.Lstat(m.BackingPath(rel)); err == nil {
					t.Errorf("%s: BACKING holds the name before the close", tc.name)
				}
			case "empty":
				if got := readFile(t, m.BackingPath(rel)); got != "" {
					t.Errorf("%s: BACKING holds %q before the close, want the empty file", tc.name, got)
				}
			}
			if _, err := f.WriteString(" whole"); err != nil {
				t.Fatal(err)
			}
			closeFile(t, f)
			if tc.after == "" {
				assertAbsent(t, m.BackingPath(rel))
			} else if got := readFile(t, m.BackingPath(rel+tc.at)); got != tc.after {
				t.Errorf("%s: BACKING holds %q after the close, want %q", tc.name, got, tc.after)
			}
			if temps := tempsIn(t, m.BackingPath(dir)); len(temps) > 0 {
				t.Errorf("%s: temps left: %v", tc.name, temps)
			}
		})
	}
}

// TestCreatedFileDirectoryMoved: a rename of a directory above a created
// file makes it real where it is (the empty file at its new place), and
// its close fills it there; the rename of a directory not above it, or
// over another one, leaves it unpublished.
func TestCreatedFileDirectoryMoved(t *testing.T) {
	t.Parallel()
	m := mount(t)
	for _, d := range []string{"a/b", "x", "y/z"} {
		if err := os.MkdirAll(m.Path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := created(t, m, "a/b/f", "part")
	if err := os.Rename(m.Path("x"), m.Path("x2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.Path("y/z"), m.Path("a/z")); err != nil {
		t.Fatal(err)
	}
	assertAbsent(t, m.BackingPath("a/b/f"))
	if err := os.Rename(m.Path("a"), m.Path("c")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m.BackingPath("c/b/f")); got != "" {
		t.Errorf("c/b/f in BACKING after its directory moved: %q, want the empty file", got)
	}
	if _, err := f.WriteString(" whole"); err != nil {
		t.Fatal(err)
	}
	closeFile(t, f)
	if got := readFile(t, m.BackingPath("c/b/f")); got != "part whole" {
		t.Errorf("c/b/f after the close: %q, want %q", got, "part whole")
	}
	assertAbsent(t, m.BackingPath("a"))
	if temps := tempsIn(t, m.BackingPath("c/b")); len(temps) > 0 {
		t.Errorf("temps left: %v", temps)
	}
}

// TestCreatedFileDaemonKilled: kill -9 of the daemon while a created file
// is open leaves no name, and the next mount's sweep removes its temp.
func TestCreatedFileDaemonKilled(t *testing.T) {
	t.Parallel()
	m := mount(t)
	f := created(t, m, "f", "part")
	if temps := tempsIn(t, m.BackingPath()); len(temps) != 1 {
		t.Fatalf("temps in BACKING while the file is open: %v, want its one", temps)
	}
	m.Kill()
	f.Close() // the connection is gone: ENOTCONN, nothing to commit
	assertAbsent(t, m.BackingPath("f"))
	off := m.LogSize() // the first mount logged its sweep too
	m.Restart()
	m.WaitLoggedSince(off, "sweep done")
	if temps := tempsIn(t, m.BackingPath()); len(temps) != 0 {
		t.Errorf("temps left after the remount's sweep: %v", temps)
	}
	assertAbsent(t, m.BackingPath("f"))
}

// hasEntry reports whether ents names name.
func hasEntry(ents []os.DirEntry, name string) bool {
	for _, e := range ents {
		if e.Name() == name {
			return true
		}
	}
	return false
}

// tempsIn lists realm's temp files in the backing directory dir (the
// live-marks directory is none).
func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var temps []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".realm-tmp-") && e.Type().IsRegular() {
			temps = append(temps, e.Name())
		}
	}
	return temps
}
