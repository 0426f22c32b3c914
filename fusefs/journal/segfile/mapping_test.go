package segfile

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func preallocated(t *testing.T, size int64) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "seg"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := Preallocate(f, size, false); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMappingWrites: a line copied into the mapping is what a read of the
// file finds, at once (the page cache is the file's); a line past the
// mapping is left to the caller.
func TestMappingWrites(t *testing.T) {
	f := preallocated(t, 64<<10)
	m := Map(f)
	defer m.Close()
	if m.b == nil {
		t.Fatal("a preallocated file was not mapped")
	}
	line := []byte(`{"seq":1}` + "\n")
	if !m.WriteAt(line, 4090) { // across a page boundary
		t.Fatal("a line within the mapping was not copied")
	}
	got := make([]byte, len(line))
	if _, err := f.ReadAt(got, 4090); err != nil || !bytes.Equal(got, line) {
		t.Fatalf("read back %q, %v; want %q", got, err, line)
	}
	if m.WriteAt(line, 64<<10-3) {
		t.Fatal("a line past the mapping's end was reported copied")
	}
}

// TestMappingFaultIsNoCrash: a file cut behind the daemon makes the next
// copy fault (SIGBUS); that is a false, the mapping dropped, not a crash.
func TestMappingFaultIsNoCrash(t *testing.T) {
	f := preallocated(t, 64<<10)
	m := Map(f)
	if m.b == nil {
		t.Fatal("a preallocated file was not mapped")
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if m.WriteAt([]byte("line\n"), 8192) {
		t.Fatal("a copy into the pages of a cut file was reported done")
	}
	if m.b != nil {
		t.Fatal("the mapping that faulted is kept")
	}
	if m.WriteAt([]byte("line\n"), 0) {
		t.Fatal("a dropped mapping copied")
	}
}

// TestSparseFileIsNotMapped: a file with holes is never mapped (a store
// into a hole allocates in the fault, and no room is a SIGBUS).
func TestSparseFileIsNotMapped(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "seg"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	m := Map(f)
	defer m.Close()
	if m.b != nil {
		t.Fatal("a sparse file was mapped")
	}
}

// TestFileWritesPastTheMapping: a segment's File copies a line into its
// mapping, and writes one past its preallocation, which extends the file;
// both read back, and Close unmaps.
func TestFileWritesPastTheMapping(t *testing.T) {
	pre := preallocated(t, 8192)
	fd, err := syscall.Dup(int(pre.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f := NewFile(fd, pre.Name()).Mapped()
	if f.m.b == nil {
		t.Fatal("a preallocated segment was not mapped")
	}
	in, past := []byte("in the mapping\n"), []byte("past it\n")
	for _, w := range []struct {
		b   []byte
		off int64
	}{{in, 100}, {past, 8192}} {
		if n, err := f.WriteAt(w.b, w.off); err != nil || n != len(w.b) {
			t.Fatalf("WriteAt at %d: %d, %v", w.off, n, err)
		}
		got := make([]byte, len(w.b))
		if _, err := pre.ReadAt(got, w.off); err != nil || !bytes.Equal(got, w.b) {
			t.Fatalf("at %d read back %q, %v; want %q", w.off, got, err, w.b)
		}
	}
	if st, err := pre.Stat(); err != nil || st.Size() != 8192+int64(len(past)) {
		t.Fatalf("size after the write past the mapping: %v, %v", st, err)
	}
	if err := f.Close(); err != nil || f.m.b != nil {
		t.Fatalf("Close: %v, the mapping left: %v", err, f.m.b != nil)
	}
}
