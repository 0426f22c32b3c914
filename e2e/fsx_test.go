package e2e

// An fsx-style checker: random writes, reads, truncates, fsyncs, reopens
// and shared mmap reads and writes on one file through the mount, each
// checked against an in-memory model of the file.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsx tuning. REALM_FSX_SEED=N replays a run; REALM_FSX_OPS=N changes the
// number of operations.
const (
	fsxOps     = 20000
	fsxMaxSize = 256 << 10 // the file never grows beyond this
	fsxMaxLen  = 64 << 10  // one write, read or mmap write
)

type fsxState struct {
	t     *testing.T
	m     *Mount
	path  string
	fd    int
	model []byte
	rng   *rand.Rand
	seed  uint64
	log   []string
	n     int
	buf   []byte
}

func (s *fsxState) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%6d ", s.n)+fmt.Sprintf(format, args...))
	if len(s.log) > 64 {
		s.log = s.log[len(s.log)-40:]
	}
}

func (s *fsxState) fail(format string, args ...any) {
	s.t.Helper()
	tail := s.log[max(0, len(s.log)-25):]
	s.t.Fatalf("fsx (seed %d, replay with REALM_FSX_SEED=%d) op %d: %s\nlast operations:\n%s",
		s.seed, s.seed, s.n, fmt.Sprintf(format, args...), strings.Join(tail, "\n"))
}

// diffAt describes where got and want first differ.
func diffAt(got, want []byte) string {
	if len(got) != len(want) {
		n := min(len(got), len(want))
		for i := range n {
			if got[i] != want[i] {
				return fmt.Sprintf("length %d, want %d; first difference at %d (%#x, want %#x)", len(got), len(want), i, got[i], want[i])
			}
		}
		return fmt.Sprintf("length %d, want %d (common prefix equal)", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			end := i
			for end < len(got) && got[end] != want[end] {
				end++
			}
			return fmt.Sprintf("bytes [%d, %d) differ: got %x..., want %x...", i, end, got[i:min(end, i+16)], want[i:min(end, i+16)])
		}
	}
	return ""
}

func (s *fsxState) randomData(n int) []byte {
	b := make([]byte, n)
	// Bytes tagged with the op number, so a misplaced block is recognisable.
	tag := byte(s.n)
	for i := range b {
		b[i] = byte(s.rng.Uint32()) ^ tag
	}
	return b
}

// check compares the file's size (fstat) and its whole content (pread) with
// the model.
func (s *fsxState) check(what string) {
	s.t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		s.fail("%s: fstat: %v", what, err)
	}
	if st.Size != int64(len(s.model)) {
		s.fail("%s: fstat size %d, model %d", what, st.Size, len(s.model))
	}
	got := s.buf[:len(s.model)+1] // one more byte: EOF must come at the size
	n, err := unix.Pread(s.fd, got, 0)
	if err != nil {
		s.fail("%s: pread of the whole file: %v", what, err)
	}
	if d := diffAt(got[:n], s.model); d != "" {
		s.fail("%s: content differs from the model: %s", what, d)
	}
}

func (s *fsxState) open() {
	s.t.Helper()
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		s.fail("open: %v", err)
	}
	s.fd = fd
}

func (s *fsxState) step() {
	s.t.Helper()
	size := len(s.model)
	switch r := s.rng.IntN(100); {
	case r < 30: // pwrite
		off := s.rng.IntN(fsxMaxSize - 1)
		n := 1 + s.rng.IntN(min(fsxMaxLen, fsxMaxSize-off))
		data := s.randomData(n)
		s.logf("pwrite off %d len %d (size %d)", off, n, size)
		w, err := unix.Pwrite(s.fd, data, int64(off))
		if err != nil || w != n {
			s.fail("pwrite off %d len %d: %d %v", off, n, w, err)
		}
		if end := off + n; end > size {
			s.model = append(s.model, make([]byte, end-size)...)
		}
		copy(s.model[off:], data)
	case r < 50: // pread of a random range, maybe past EOF
		off := s.rng.IntN(fsxMaxSize)
		n := 1 + s.rng.IntN(fsxMaxLen)
		s.logf("pread off %d len %d (size %d)", off, n, size)
		got := s.buf[:n]
		k, err := unix.Pread(s.fd, got, int64(off))
		if err != nil {
			s.fail("pread off %d len %d: %v", off, n, err)
		}
		var want []byte
		if off < size {
			want = s.model[off:min(size, off+n)]
		}
		if d := diffAt(got[:k], want); d != "" {
			s.fail("pread off %d len %d: %s", off, n, d)
		}
	case r < 60: // ftruncate, grow or shrink
		newSize := s.rng.IntN(fsxMaxSize + 1)
		if s.rng.IntN(3) == 0 {
			newSize = s.rng.IntN(size + 1) // shrink more often than not
		}
		s.logf("ftruncate %d (size %d)", newSize, size)
		if err := unix.Ftruncate(s.fd, int64(newSize)); err != nil {
			s.fail("ftruncate %d: %v", newSize, err)
		}
		if newSize <= size {
			s.model = s.model[:newSize]
		} else {
			s.model = append(s.model, make([]byte, newSize-size)...)
		}
	case r < 65: // fsync: commits
		s.logf("fsync (size %d)", size)
		if err := unix.Fsync(s.fd); err != nil {
			s.fail("fsync: %v", err)
		}
		s.checkBacking("after fsync")
	case r < 70: // close and reopen: commits
		s.logf("close+reopen (size %d)", size)
		err := unix.Close(s.fd)
		s.fd = -1
		if err != nil {
			s.fail("close: %v", err)
		}
		s.checkBacking("after close")
		s.open()
	case r < 73: // a second descriptor by name sees this owner's content
		s.logf("open O_RDONLY by name and read all (size %d)", size)
		b, err := os.ReadFile(s.path)
		if err != nil {
			s.fail("reading by name: %v", err)
		}
		if d := diffAt(b, s.model); d != "" {
			s.fail("reading by name: %s", d)
		}
	case r < 86: // mmap read
		if size == 0 {
			s.logf("mmap read skipped (empty)")
			break
		}
		s.logf("mmap read (size %d)", size)
		mem, err := unix.Mmap(s.fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			s.fail("mmap PROT_READ MAP_SHARED size %d: %v", size, err)
		}
		d := diffAt(mem, s.model)
		unix.Munmap(mem)
		if d != "" {
			s.fail("mmap read: %s", d)
		}
	default: // mmap write + msync
		if size == 0 {
			s.logf("mmap write skipped (empty)")
			break
		}
		off := s.rng.IntN(size)
		n := 1 + s.rng.IntN(min(fsxMaxLen, size-off))
		data := s.randomData(n)
		s.logf("mmap write off %d len %d + msync (size %d)", off, n, size)
		mem, err := unix.Mmap(s.fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			s.fail("mmap PROT_WRITE MAP_SHARED size %d: %v", size, err)
		}
		copy(mem[off:], data)
		err = unix.Msync(mem, unix.MS_SYNC)
		unix.Munmap(mem)
		if err != nil {
			s.fail("msync: %v", err)
		}
		copy(s.model[off:], data)
	}
	s.check(s.log[len(s.log)-1])
}

// checkBacking compares the file in BACKING (committed content) with the
// model.
func (s *fsxState) checkBacking(what string) {
	s.t.Helper()
	b, err := os.ReadFile(s.m.BackingPath("fsx"))
	if err != nil {
		s.fail("%s: reading BACKING: %v", what, err)
	}
	if d := diffAt(b, s.model); d != "" {
		s.fail("%s: BACKING (the committed file) differs from the model: %s", what, d)
	}
}

// TestFsx runs the random checker for 20,000 operations.
func TestFsx(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("REALM_FSX_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	ops := fsxOps
	if v := os.Getenv("REALM_FSX_OPS"); v != "" {
		ops, _ = strconv.Atoi(v)
	}
	t.Logf("fsx seed %d (replay: REALM_FSX_SEED=%d), %d operations", seed, seed, ops)
	m := mount(t)
	s := &fsxState{t: t, m: m, path: m.Path("fsx"), rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		seed: seed, buf: make([]byte, fsxMaxSize+fsxMaxLen+1)}
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.fd = fd
	// A failure leaves the descriptor open; close it so the mount can go.
	t.Cleanup(func() {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
	})
	start := time.Now()
	for s.n = 0; s.n < ops; s.n++ {
		s.step()
	}
	err = unix.Close(s.fd)
	s.fd = -1
	if err != nil {
		s.fail("final close: %v", err)
	}
	s.checkBacking("after the final close")
	got := readFile(t, m.Path("fsx"))
	if !bytes.Equal([]byte(got), s.model) {
		s.fail("after the final close, the mount: %s", diffAt([]byte(got), s.model))
	}
	assertNoTemp(t, m.Backing, "after fsx")
	t.Logf("%d operations in %v, final size %d", ops, time.Since(start).Round(time.Millisecond), len(s.model))
}
