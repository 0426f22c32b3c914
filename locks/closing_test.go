package locks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDescriptorsCountsThisInode(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	tid := uint32(unix.Gettid())
	count := func() Closing {
		t.Helper()
		c, err := r.Descriptors(tid, st.Ino)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count(); c.Others != 0 || c.Exiting {
		t.Fatalf("before open: %+v, want no descriptors and not exiting", c)
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if c := count(); c.Others != 1 {
		t.Fatalf("one descriptor: %+v", c)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	if c := count(); c.Others != 2 {
		t.Fatalf("after dup: %+v", c)
	}
	unix.Close(dup)
	if c := count(); c.Others != 1 {
		t.Fatalf("after closing the dup: %+v", c)
	}
}

func TestDescriptorsOfAVanishedThread(t *testing.T) {
	r := NewResolver(OwnerPID, t.TempDir()) // no such thread beneath it
	if _, err := r.Descriptors(4242, 1); err == nil {
		t.Fatal("want an error for a thread that is not there")
	}
}

func TestFdinfoIno(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"pos:\t0\nflags:\t0100002\nmnt_id:\t31\nino:\t1234\n", 1234},
		{"pos:\t0\nflags:\t02\nmnt_id:\t31\n", 0},
		{"ino:\t18446744073709551615\n", 1<<64 - 1},
		{"ino:\tbogus\n", 0},
		{"", 0},
	} {
		if got := fdinfoIno([]byte(tc.in)); got != tc.want {
			t.Errorf("fdinfoIno(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestStatExitCode(t *testing.T) {
	// A stat line of 52 fields; exit_code is the last.
	line := func(comm string, code string) string {
		f := make([]string, 50) // fields 3..52
		for i := range f {
			f[i] = "0"
		}
		f[0] = "R"
		f[len(f)-1] = code
		return "42 (" + comm + ") " + strings.Join(f, " ") + "\n"
	}
	for _, tc := range []struct {
		name, in string
		want     int
		bad      bool
	}{
		{"normal exit 3", line("sh", "768"), 768, false},
		{"killed", line("tr", "9"), 9, false},
		{"comm with spaces and parens", line("a) (b", "15"), 15, false},
		{"short line", "42 (x) R 1 2\n", 0, true},
		{"no comm", "42 x R\n", 0, true},
		{"not a number", line("x", "nine"), 0, true},
	} {
		got, err := statExitCode([]byte(tc.in))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%s: statExitCode = %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.bad)
		}
	}
}
