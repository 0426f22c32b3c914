package dirfd

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// sparseFile makes a 1 GiB file that is a hole but for a few blocks of
// data, the last of them its last byte.
func sparseFile(t *testing.T, dir string) (*os.File, []int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	const size = 1 << 30
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	offs := []int64{0, 4096 * 3, 300 << 20, 700<<20 + 17, size - 1}
	for i, off := range offs {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte('a' + i)}, int(min(9000, size-off))), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Skipf("the filesystem of %s keeps no holes (%d blocks)", dir, st.Blocks)
	}
	return f, offs
}

// dataSum hashes the data extents of fd below size, as SEEK_DATA and
// SEEK_HOLE find them, with their offsets.
func dataSum(t *testing.T, fd int, size int64) ([32]byte, int) {
	t.Helper()
	h := sha256.New()
	extents := 0
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		hole = min(hole, size)
		buf := make([]byte, hole-data)
		if _, err := unix.Pread(fd, buf, data); err != nil {
			t.Fatal(err)
		}
		h.Write([]byte{byte(data), byte(data >> 8), byte(data >> 16), byte(data >> 24), byte(data >> 32)})
		h.Write(buf)
		extents++
		off = hole
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, extents
}

// TestCloneOrCopySparse: the temp of a write into a 1 GiB sparse file
// holds the file's data where it has data and holes elsewhere: it
// allocates about what the file does, not 1 GiB (a 1-byte write cost 3.45 s
// and 2 GiB before). Whole (a temp's seed) and cut to a size (a commit
// into a file with several links).
func TestCloneOrCopySparse(t *testing.T) {
	dir := t.TempDir()
	src, offs := sparseFile(t, dir)
	var sst unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &sst); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{-1, 700<<20 + 4000} {
		dst, err := os.CreateTemp(dir, "copy")
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Close()
		if err := CloneOrCopy(int(dst.Fd()), int(src.Fd()), size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		want := size
		if size < 0 {
			want = sst.Size
		}
		var dt unix.Stat_t
		if err := unix.Fstat(int(dst.Fd()), &dt); err != nil {
			t.Fatal(err)
		}
		if dt.Size != want {
			t.Errorf("size %d: copy is %d bytes, want %d", size, dt.Size, want)
		}
		if dt.Blocks > 4*sst.Blocks+64 {
			t.Errorf("size %d: copy allocates %d blocks, the file %d", size, dt.Blocks, sst.Blocks)
		}
		for _, off := range append(offs, 1<<20, 500<<20) {
			if off >= want {
				continue
			}
			a, b := make([]byte, 1), make([]byte, 1)
			src.ReadAt(a, off)
			if _, err := dst.ReadAt(b, off); err != nil || a[0] != b[0] {
				t.Errorf("size %d: byte at %d is %q (%v), want %q", size, off, b, err, a)
			}
		}
		ws, we := dataSum(t, int(src.Fd()), want)
		gs, ge := dataSum(t, int(dst.Fd()), want)
		if ws != gs {
			t.Errorf("size %d: the copy's data extents (%d) differ from the file's (%d)", size, ge, we)
		}
	}
}
