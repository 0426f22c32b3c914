package dirfd

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// encodeDirents lays entries out as linux_dirent64 records the way the
// kernel does: the name NUL-terminated and each record padded to 8 bytes.
// The off field is the record's index.
func encodeDirents(ents []Dirent) []byte {
	var b []byte
	for i, e := range ents {
		reclen := (19 + len(e.Name) + 1 + 7) &^ 7
		rec := make([]byte, reclen)
		binary.NativeEndian.PutUint64(rec[0:8], e.Ino)
		binary.NativeEndian.PutUint64(rec[8:16], uint64(i+1))
		binary.NativeEndian.PutUint16(rec[16:18], uint16(reclen))
		rec[18] = e.Type
		copy(rec[19:], e.Name)
		b = append(b, rec...)
	}
	return b
}

// FuzzParseDirents: parseDirents never panics on any buffer, never yields
// a name holding NUL or naming "." or "..", and what it yields re-encodes
// to records that parse back to the same entries and encode again to the
// same bytes (nothing is lost or shifted between records).
func FuzzParseDirents(f *testing.F) {
	// A real getdents64 buffer, and pieces of it.
	dir := f.TempDir()
	for _, n := range []string{"a", "bb", "a name with spaces", "ünïcode", "x.realm-tmp-1", string(bytes.Repeat([]byte("n"), 255))} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		f.Fatal(err)
	}
	buf := make([]byte, 8<<10)
	n, err := unix.Getdents(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		f.Fatalf("getdents64: %d, %v", n, err)
	}
	listing := buf[:n]
	f.Add(listing)
	f.Add(listing[:n/2])
	f.Add(listing[:19])
	f.Add(encodeDirents([]Dirent{{Name: "f", Ino: 7, Type: unix.DT_REG}, {Name: "d", Ino: 8, Type: unix.DT_DIR}}))
	f.Add([]byte{})
	f.Add(make([]byte, 19))                             // reclen 0
	f.Add(append(make([]byte, 16), 0xff, 0xff, 4, 'x')) // reclen past the end
	f.Fuzz(func(t *testing.T, b []byte) {
		ents := parseDirents(b, nil)
		if len(ents) > len(b)/19 {
			t.Fatalf("%d entries from %d bytes", len(ents), len(b))
		}
		for _, e := range ents {
			if bytes.IndexByte([]byte(e.Name), 0) >= 0 || e.Name == "." || e.Name == ".." {
				t.Fatalf("entry name %q", e.Name)
			}
		}
		enc := encodeDirents(ents)
		again := parseDirents(enc, nil)
		if !slices.Equal(again, ents) {
			t.Fatalf("re-encoded entries parse as %+v, want %+v", again, ents)
		}
		if enc2 := encodeDirents(again); !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}
