package carry

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func newCarry(t *testing.T) (*Carry, int) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fd := int(f.Fd())
	if err := unix.Fsetxattr(fd, Attr, nil, 0); err != nil {
		t.Skipf("the temp dir's filesystem takes no user attributes: %v", err)
	}
	return New(fd), fd
}

func attr(t *testing.T, fd int) string {
	t.Helper()
	b, err := Read(fd)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCarry: each step adds a line (or notes lines written), then checks
// what the attribute holds and whether the line was taken.
func TestCarry(t *testing.T) {
	line := func(c byte, n int) []byte { return append(bytes.Repeat([]byte{c}, n-1), '\n') }
	type step struct {
		add      []byte // nil: Written(written)
		onDevice uint64 // Add's
		written  uint64 // Written's
		took     bool
		want     string // the attribute after
	}
	a, b, c := line('a', 10), line('b', 20), line('c', 30)
	big := line('z', DefaultMax)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"held lines stay", []step{
			{add: a, took: true, want: string(a)},
			{add: b, onDevice: 1 << 30, took: true, want: string(a) + string(b)},
		}},
		{"lines on the device leave", []step{
			{add: a, took: true, want: string(a)},
			{add: b, took: true, want: string(a) + string(b)},
			{written: 100},
			{add: c, onDevice: 99, took: true, want: string(a) + string(b) + string(c)},
			{add: c, onDevice: 100, took: true, want: string(c) + string(c)},
		}},
		{"only the lines written up to the device leave", []step{
			{add: a, took: true, want: string(a)},
			{written: 50},
			{add: b, took: true, want: string(a) + string(b)},
			{written: 90},
			{add: c, onDevice: 60, took: true, want: string(b) + string(c)},
		}},
		{"a line past the room is not taken, the attribute left", []step{
			{add: a, took: true, want: string(a)},
			{add: big, took: false, want: string(a)},
			{written: 10},
			{add: big, onDevice: 10, took: true, want: string(big)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr, fd := newCarry(t)
			for i, s := range tc.steps {
				if s.add == nil {
					cr.Written(s.written)
					continue
				}
				if took := cr.Add(s.add, s.onDevice); took != s.took {
					t.Fatalf("step %d: Add took %v, want %v", i, took, s.took)
				}
				if got := attr(t, fd); got != s.want {
					t.Fatalf("step %d: the attribute holds %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

// TestCarryLessRoom: where the filesystem refuses a value as too large,
// the line is not taken and the Carry holds less from then on.
func TestCarryLessRoom(t *testing.T) {
	cr, fd := newCarry(t)
	cr.max = 1 << 20 // more than any ext4 attribute block takes
	huge := []byte(strings.Repeat("x", 70<<10) + "\n")
	if cr.Add(huge, 0) {
		t.Skip("this filesystem took a 70 KiB attribute (ea_inode)")
	}
	if cr.max != 0 || cr.Len() != 0 || attr(t, fd) != "" {
		t.Errorf("after a refused line: max %d, %d lines, attribute %q; want 0, 0, empty", cr.max, cr.Len(), attr(t, fd))
	}
	if cr.off {
		t.Error("a value too large turned the carry off")
	}
}

// TestCarryOff: a file whose filesystem takes no user attribute (here: a
// descriptor that is not a file's) turns the Carry off: nothing taken.
func TestCarryOff(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cr := New(int(w.Fd()))
	if cr.Add([]byte("a\n"), 0) || !cr.off {
		t.Fatal("a pipe's attribute was set; want the carry off")
	}
	if cr.Add([]byte("b\n"), 0) {
		t.Fatal("an Add after the carry went off was taken")
	}
}

// TestClear: Clear empties the attribute; Read of a file with none is nil.
func TestClear(t *testing.T) {
	cr, fd := newCarry(t)
	if !cr.Add([]byte("a\n"), 0) {
		t.Fatal("not taken")
	}
	if err := Clear(fd); err != nil {
		t.Fatal(err)
	}
	if got := attr(t, fd); got != "" {
		t.Fatalf("after Clear the attribute holds %q", got)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := Read(int(f.Fd())); b != nil || err != nil {
		t.Fatalf("Read of a file with no attribute: %q, %v", b, err)
	}
}
