package e2e

// Issue 4 end to end: the lock table between owners, atomic writes seen by
// readers, the commit failure stages, ENOSPC, conflict copies, kill -9 of
// the daemon, and the temp-residue sweep.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fillPattern fills b with the bytes at offset off of the pattern seeded by
// seed: each 8-byte word holds its offset, xored with the seed, so two
// patterns differ in every word and a misplaced block is visible.
func fillPattern(b []byte, seed byte, off int64) {
	for i := range b {
		o := off + int64(i)
		word := uint64(o/8) ^ (uint64(seed) * 0x9E3779B97F4A7C15)
		b[i] = byte(word >> (8 * uint(o%8)))
	}
}

// patternSum is the sha256 of size bytes of pattern(seed).
func patternSum(seed byte, size int64) [32]byte {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		fillPattern(buf[:n], seed, off)
		h.Write(buf[:n])
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// writePattern writes size bytes of pattern(seed) to path (not through a mount).
func writePattern(tb testing.TB, path string, seed byte, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		fillPattern(buf[:n], seed, off)
		if _, err := f.Write(buf[:n]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// TestLockTwoOwners: under lockowner=pid, a file held open for writing by
// one process cannot be opened for writing, truncated or renamed over by
// another (EBUSY, LOCK_CONFLICT, content unchanged); the holder itself can
// open it again; once the holder closes, the other succeeds.
func TestLockTwoOwners(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "original\n")
		writeFile(t, m.BackingPath("other"), "other file\n")
	}))
	before := stateOf(t, m.BackingPath("f"))
	finish := holdWrite(t, m.Path("f"), "holder's bytes\n")

	var results []struct {
		name string
		err  error
	}
	lockedThread(func() {
		for _, op := range []struct {
			name string
			do   func() error
		}{
			{"open O_WRONLY", func() error { return closeFd(unix.Open(m.Path("f"), unix.O_WRONLY|unix.O_CLOEXEC, 0)) }},
			{"open O_RDWR", func() error { return closeFd(unix.Open(m.Path("f"), unix.O_RDWR|unix.O_CLOEXEC, 0)) }},
			{"open O_WRONLY|O_TRUNC", func() error { return closeFd(unix.Open(m.Path("f"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)) }},
			{"open O_WRONLY|O_APPEND", func() error { return closeFd(unix.Open(m.Path("f"), unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)) }},
			{"truncate", func() error { return unix.Truncate(m.Path("f"), 0) }},
			{"rename over", func() error { return unix.Rename(m.Path("other"), m.Path("f")) }},
		} {
			results = append(results, struct {
				name string
				err  error
			}{op.name, op.do()})
		}
	})
	for _, r := range results {
		wantErrno(t, r.err, unix.EBUSY, "second owner: "+r.name+" while another process writes f")
	}
	// Readers of another owner see the old content, whole.
	if got := readFile(t, m.Path("f")); got != "original\n" {
		t.Errorf("read by another owner while held = %q, want the original", got)
	}
	if d := before.diff(stateOf(t, m.BackingPath("f"))); d != "" {
		t.Errorf("f changed while held: %s", d)
	}
	if got := readFile(t, m.BackingPath("other")); got != "other file\n" {
		t.Errorf("other = %q after a refused rename", got)
	}
	e := m.WaitAudit("LOCK_CONFLICT on f", func(e auditEntry) bool {
		return e.path() == "f" && e.str("code") == "LOCK_CONFLICT"
	})
	if !e.errnoIs(unix.EBUSY) {
		t.Errorf("LOCK_CONFLICT audit errno %q, want EBUSY", e.str("errno"))
	}

	if line := finish(); line != "close ok" {
		t.Errorf("holder: %q, want close ok", line)
	}
	if got := readFile(t, m.BackingPath("f")); got != "holder's bytes\n" {
		t.Errorf("f after the holder closed = %q", got)
	}
	// Now the other owner succeeds at once (the release is already queued;
	// realmfs waits up to 250 ms for it).
	var err error
	lockedThread(func() {
		err = os.WriteFile(m.Path("f"), []byte("second owner\n"), 0o644)
	})
	if err != nil {
		t.Errorf("second owner's write after the holder closed: %v", err)
	} else if got := readFile(t, m.BackingPath("f")); got != "second owner\n" {
		t.Errorf("f = %q after the second owner's write", got)
	}
}

// TestLockSameOwner: one owner opening a file for writing twice works, and
// both handles share one pending content.
func TestLockSameOwner(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "0123456789\n")
	}))
	t.Run("one thread, python3", func(t *testing.T) {
		py := `import sys
p = sys.argv[1]
a = open(p, "r+b", buffering=0)
b = open(p, "r+b", buffering=0)
a.write(b"AA")
b.seek(5); b.write(b"BB")
c = open(p, "rb")
seen = c.read(); c.close()
a.close(); b.close()
print(seen.decode().strip())
`
		out := run(t, m.Dir, nil, "python3", "-c", py, "f")
		if strings.TrimSpace(out) != "AA234BB789" {
			t.Errorf("same process reading its own uncommitted writes: %q, want AA234BB789", out)
		}
		if got := readFile(t, m.BackingPath("f")); got != "AA234BB789\n" {
			t.Errorf("f = %q after two handles of one owner closed, want AA234BB789", got)
		}
	})
	t.Run("two threads of one process", func(t *testing.T) {
		// README: lockowner=pid makes each *process* an owner. The kernel
		// sends the calling thread's id.
		out, err := helperCmd(context.Background(), nil, "twothreads", m.Path("f")).CombinedOutput()
		if err != nil {
			t.Fatalf("twothreads: %v\n%s", err, out)
		}
		if strings.Count(string(out), " ok") != 2 {
			t.Errorf("two threads of one process opening f for writing under lockowner=pid:\n%s(want both ok: one process is one owner)", out)
		}
	})
}

// TestReadersNeverSeePartial: while another owner writes 100 MiB of new
// content over a file, every complete read of it is exactly the old or
// exactly the new content.
func TestReadersNeverSeePartial(t *testing.T) {
	t.Parallel()
	const size = 100 << 20
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) {
		writePattern(t, m.BackingPath("big"), 1, size)
	}))
	oldSum, newSum := patternSum(1, size), patternSum(2, size)

	writer := startProc(t, helperCmd(context.Background(), nil, "bigwrite", m.Path("big"), fmt.Sprint(size), fmt.Sprint(256<<10), "2"), true)
	if line := writer.line(t, 20*time.Second, "bigwrite open"); line != "open" {
		t.Fatalf("bigwrite: %q", line)
	}
	var writerDone atomic.Bool
	var nOld, nNew, nBad atomic.Int64
	var badMu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for after := 0; after < 2; {
				if writerDone.Load() {
					after++ // a couple of reads after the commit
				}
				f, err := os.Open(m.Path("big"))
				if err != nil {
					badMu.Lock()
					bad = append(bad, "open: "+err.Error())
					badMu.Unlock()
					nBad.Add(1)
					return
				}
				h := sha256.New()
				n, err := io.CopyBuffer(h, f, buf)
				f.Close()
				var s [32]byte
				copy(s[:], h.Sum(nil))
				switch {
				case err == nil && s == oldSum:
					nOld.Add(1)
				case err == nil && s == newSum:
					nNew.Add(1)
				default:
					nBad.Add(1)
					badMu.Lock()
					bad = append(bad, fmt.Sprintf("read of %d bytes (err %v) is neither old nor new", n, err))
					badMu.Unlock()
				}
			}
		})
	}
	line := writer.line(t, 2*time.Minute, "bigwrite close")
	writer.wait()
	writerDone.Store(true)
	wg.Wait()
	if line != "close ok" {
		t.Errorf("writer: %q, want close ok", line)
	}
	t.Logf("reads: %d old, %d new, %d bad", nOld.Load(), nNew.Load(), nBad.Load())
	for _, b := range bad[:min(len(bad), 10)] {
		t.Error(b)
	}
	if nOld.Load() == 0 {
		t.Error("no read saw the old content while the write was in progress (the test did not overlap)")
	}
	if nNew.Load() == 0 {
		t.Error("no read saw the new content after the commit")
	}
	f, err := os.Open(m.BackingPath("big"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	io.Copy(h, f)
	f.Close()
	if !bytes.Equal(h.Sum(nil), newSum[:]) {
		t.Error("BACKING/big is not the new content after the commit")
	}
	assertNoTemp(t, m.Backing, "after the 100 MiB write")
}

// TestCommitFailureStages: with a realmfs built -tags realmtest and
// REALMFS_FAIL_AT=STAGE, a write over an existing file fails with EIO from
// close (or fsync), the file is byte-identical, no temp is left, and the
// audit log has WRITE_NOT_ATOMIC.
func TestCommitFailureStages(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	bin := realmtestBinary(t)
	for _, stage := range []string{"after-write", "after-fsync", "before-rename"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			m := mount(t, Binary(bin, "REALMFS_FAIL_AT="+stage), Prepare(func(m *Mount) {
				for _, n := range []string{"by-close", "by-fsync", "no-trunc"} {
					writeFile(t, m.BackingPath(n), "original "+n+"\n")
					old := time.Now().Add(-time.Hour)
					os.Chtimes(m.BackingPath(n), old, old)
				}
			}))
			before := map[string]fileState{}
			for _, n := range []string{"by-close", "by-fsync", "no-trunc"} {
				before[n] = stateOf(t, m.BackingPath(n))
			}
			// close
			fd, err := unix.Open(m.Path("by-close"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Write(fd, []byte("new content that must not land\n")); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, unix.Close(fd), unix.EIO, stage+": close")
			// fsync
			fd, err = unix.Open(m.Path("by-fsync"), unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Write(fd, []byte("new content that must not land\n")); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, unix.Fsync(fd), unix.EIO, stage+": fsync")
			unix.Close(fd)
			// a partial overwrite (temp seeded from the file)
			fd, err = unix.Open(m.Path("no-trunc"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Pwrite(fd, []byte("XXXX"), 3); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, unix.Close(fd), unix.EIO, stage+": close after pwrite")

			for n, was := range before {
				if d := was.diff(stateOf(t, m.BackingPath(n))); d != "" {
					t.Errorf("%s: %s changed after a failed commit: %s", stage, n, d)
				}
				if got := readFile(t, m.Path(n)); got != was.data {
					t.Errorf("%s: %s through the mount = %q, want %q", stage, n, got, was.data)
				}
				m.WaitAudit("WRITE_NOT_ATOMIC for "+n, func(e auditEntry) bool {
					return e.path() == n && e.str("code") == "WRITE_NOT_ATOMIC" && e.errnoIs(unix.EIO)
				})
			}
			assertNoTemp(t, m.Backing, stage)
		})
	}
}

// TestENOSPC: on a 2 MiB tmpfs BACKING, writing 3 MiB over a 1 MiB file
// fails with ENOSPC (write or close); the file is intact, no temp is left,
// and the space is back for the next write.
func TestENOSPC(t *testing.T) {
	t.Parallel()
	var oldSum [32]byte
	m := mount(t, Prepare(func(m *Mount) {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", m.Backing).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v %s", err, out)
		}
		// Registered before the mount's cleanup, so it runs after it.
		t.Cleanup(func() {
			if out, err := exec.Command("umount", m.Backing).CombinedOutput(); err != nil {
				t.Errorf("umount tmpfs: %v %s", err, out)
				exec.Command("umount", "-l", m.Backing).Run()
			}
		})
		writePattern(t, m.BackingPath("big"), 1, 1<<20)
		oldSum = patternSum(1, 1<<20)
	}))
	before := lstat(t, m.BackingPath("big"))

	fd, err := unix.Open(m.Path("big"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	var werr error
	for off := int64(0); off < 3<<20 && werr == nil; off += int64(len(buf)) {
		fillPattern(buf, 2, off)
		_, werr = unix.Write(fd, buf)
	}
	cerr := unix.Close(fd)
	t.Logf("write: %v, close: %v", werr, cerr)
	if errnoOf(werr) != unix.ENOSPC && errnoOf(cerr) != unix.ENOSPC {
		t.Errorf("3 MiB over 1 MiB on a 2 MiB fs: write %v, close %v; want ENOSPC from one of them", werr, cerr)
	}
	f, err := os.ReadFile(m.BackingPath("big"))
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(f) != oldSum {
		t.Errorf("big changed after ENOSPC (%d bytes)", len(f))
	}
	after := lstat(t, m.BackingPath("big"))
	if after.Ino != before.Ino || after.Mtim != before.Mtim {
		t.Errorf("big replaced or touched after ENOSPC: ino %d→%d mtime %v→%v", before.Ino, after.Ino, before.Mtim, after.Mtim)
	}
	assertNoTemp(t, m.Backing, "after ENOSPC")
	// The space came back: a small write commits.
	writeFile(t, m.Path("small"), "fits\n")
	if got := readFile(t, m.BackingPath("small")); got != "fits\n" {
		t.Errorf("small = %q", got)
	}
}

// TestConflictCopy: a file changed in BACKING behind an open write handle
// is left as the outside process made it; the mount's bytes go to
// NAME.realm-conflict-*, close (or fsync) returns EBUSY, LOCK_CONFLICT.
func TestConflictCopy(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		for _, n := range []string{"inplace", "replaced", "viafsync"} {
			writeFile(t, m.BackingPath(n), "original "+n+"\n")
		}
	}))
	for _, tc := range []struct {
		name    string
		outside func(p string) error
		fsync   bool
	}{
		{"inplace", func(p string) error { return os.WriteFile(p, []byte("outside inplace\n"), 0o644) }, false},
		{"replaced", func(p string) error {
			if err := os.WriteFile(p+".new", []byte("outside replaced\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(p+".new", p)
		}, false},
		{"viafsync", func(p string) error { return os.WriteFile(p, []byte("outside viafsync\n"), 0o644) }, true},
	} {
		mine := "written through the mount to " + tc.name + "\n"
		fd, err := unix.Open(m.Path(tc.name), unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(fd, []byte(mine)); err != nil {
			t.Fatal(err)
		}
		if err := tc.outside(m.BackingPath(tc.name)); err != nil {
			t.Fatal(err)
		}
		if tc.fsync {
			wantErrno(t, unix.Fsync(fd), unix.EBUSY, tc.name+": fsync after an outside change")
			unix.Close(fd)
		} else {
			wantErrno(t, unix.Close(fd), unix.EBUSY, tc.name+": close after an outside change")
		}
		want := "outside " + tc.name + "\n"
		if got := readFile(t, m.BackingPath(tc.name)); got != want {
			t.Errorf("%s: BACKING holds %q, want the outside content %q", tc.name, got, want)
		}
		if got := readFile(t, m.Path(tc.name)); got != want {
			t.Errorf("%s: the mount shows %q, want the outside content %q", tc.name, got, want)
		}
		copies, _ := filepath.Glob(m.BackingPath(tc.name + ".realm-conflict-*"))
		if len(copies) != 1 {
			t.Errorf("%s: conflict copies %v, want one", tc.name, copies)
		} else {
			if got := readFile(t, copies[0]); got != mine {
				t.Errorf("%s: conflict copy holds %q, want %q", tc.name, got, mine)
			}
			if _, err := os.Stat(m.Path(filepath.Base(copies[0]))); err != nil {
				t.Errorf("%s: conflict copy not visible through the mount: %v", tc.name, err)
			}
		}
		m.WaitAudit("LOCK_CONFLICT for "+tc.name, func(e auditEntry) bool {
			return e.path() == tc.name && e.str("code") == "LOCK_CONFLICT" && e.errnoIs(unix.EBUSY)
		})
	}
	assertNoTemp(t, m.Backing, "after conflicts")
}

// killContent is version v of file i in the kill test: sizes vary with the
// version for truncating writers, and every line names file and version.
func killContent(i, v int, fixed bool) []byte {
	size := 48<<10 + (v%5)*12<<10
	if fixed {
		size = 64 << 10
	}
	line := fmt.Sprintf("file %d version %06d|", i, v)
	return []byte(strings.Repeat(line, size/len(line)+1)[:size])
}

// TestKill9DuringWrites: kill -9 of realmfs at random moments of a loop of
// writes, 50 times, each followed by a remount: every file is exactly its
// last committed or its in-flight version, and the sweep at mount leaves no
// temp behind.
func TestKill9DuringWrites(t *testing.T) {
	t.Parallel()
	const files, rounds = 4, 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	fixed := func(i int) bool { return i%2 == 1 } // odd files: pwrite over, no O_TRUNC
	committed := make([]int, files)
	m := mount(t, Prepare(func(m *Mount) {
		for i := range files {
			if err := os.WriteFile(m.BackingPath(fmt.Sprintf("f%d", i)), killContent(i, 0, fixed(i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}))
	sawTemp := 0
	for round := range rounds {
		attempted := make([]int, files)
		var wg sync.WaitGroup
		var stop atomic.Bool
		for i := range files {
			wg.Go(func() {
				for v := committed[i] + 1; !stop.Load(); v++ {
					attempted[i] = v
					data := killContent(i, v, fixed(i))
					flags := unix.O_WRONLY | unix.O_TRUNC
					if fixed(i) {
						flags = unix.O_WRONLY
					}
					fd, err := unix.Open(m.Path(fmt.Sprintf("f%d", i)), flags|unix.O_CLOEXEC, 0)
					if err != nil {
						return
					}
					ok := true
					for off := 0; off < len(data) && ok; off += 8 << 10 {
						_, err := unix.Pwrite(fd, data[off:min(off+8<<10, len(data))], int64(off))
						ok = err == nil
					}
					if err := unix.Close(fd); err != nil || !ok {
						return
					}
					committed[i] = v
				}
			})
		}
		conn := m.conn
		time.Sleep(time.Duration(rng.IntN(60)+1) * time.Millisecond)
		if stuck := m.KillWithin(3 * time.Second); stuck != "" {
			t.Errorf("round %d: %s; the FUSE connection had to be aborted through /sys/fs/fuse/connections/%d/abort", round, stuck, conn)
		}
		stop.Store(true)
		wg.Wait()
		if len(tempResidue(t, m.Backing)) > 0 {
			sawTemp++
		}
		m.Restart()
		for i := range files {
			name := fmt.Sprintf("f%d", i)
			for _, where := range []string{m.BackingPath(name), m.Path(name)} {
				got, err := os.ReadFile(where)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				switch {
				case bytes.Equal(got, killContent(i, committed[i], fixed(i))):
				case attempted[i] > committed[i] && bytes.Equal(got, killContent(i, attempted[i], fixed(i))):
					if where == m.BackingPath(name) {
						committed[i] = attempted[i] // the commit landed; its close did not return
					}
				default:
					t.Fatalf("round %d: %s is neither version %d nor %d (len %d, starts %q, ends %q)",
						round, where, committed[i], attempted[i], len(got), got[:min(40, len(got))], got[max(0, len(got)-40):])
				}
			}
		}
		// The sweep runs at mount (in the background): give it a moment.
		deadline := time.Now().Add(5 * time.Second)
		for len(tempResidue(t, m.Backing)) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if left := tempResidue(t, m.Backing); len(left) > 0 {
			t.Fatalf("round %d: temp files left after the remount: %v", round, left)
		}
	}
	t.Logf("versions reached: %v; rounds that left temps before the remount: %d", committed, sawTemp)
	if conflicts, _ := filepath.Glob(m.BackingPath("*.realm-conflict-*")); len(conflicts) > 0 {
		t.Errorf("conflict copies appeared without any outside change: %v", conflicts)
	}
}

// TestTempResidue: temps left in BACKING before the mount are removed at
// mount and the removal is logged; conflict copies stay; .realm-tmp-* names
// are never listed, never found, and cannot be created through the mount.
func TestTempResidue(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".realm-tmp-leftover"), "residue")
		writeFile(t, m.BackingPath("sub", ".realm-tmp-deep"), "residue")
		writeFile(t, m.BackingPath("x.realm-conflict-old"), "kept bytes")
		writeFile(t, m.BackingPath("x"), "x")
		old := time.Now().Add(-24 * time.Hour)
		for _, p := range []string{".realm-tmp-leftover", "sub/.realm-tmp-deep"} {
			os.Chtimes(m.BackingPath(p), old, old)
		}
		time.Sleep(20 * time.Millisecond) // ctime strictly before the mount
	}))
	deadline := time.Now().Add(5 * time.Second)
	for len(tempResidue(t, m.Backing)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoTemp(t, m.Backing, "after the mount-time sweep")
	if got := readFile(t, m.BackingPath("x.realm-conflict-old")); got != "kept bytes" {
		t.Errorf("conflict copy = %q", got)
	}
	if got := readFile(t, m.Path("x.realm-conflict-old")); got != "kept bytes" {
		t.Errorf("conflict copy through the mount = %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		log, _ := os.ReadFile(m.LogFile)
		if strings.Contains(string(log), "2 temp files left by a crash removed") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("realmfs log does not count the 2 removed temps:\n%s", log)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A temp-named file made after the mount is not swept, and never seen.
	writeFile(t, m.BackingPath(".realm-tmp-new"), "fresh")
	writeFile(t, m.BackingPath("sub", ".realm-tmp-new2"), "fresh")
	for _, dir := range []string{"", "sub"} {
		ents, err := os.ReadDir(m.Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".realm-tmp-") {
				t.Errorf("ls %q lists %s", dir, e.Name())
			}
		}
	}
	for _, p := range []string{".realm-tmp-new", "sub/.realm-tmp-new2"} {
		_, err := os.Lstat(m.Path(p))
		wantErrno(t, err, unix.ENOENT, "lstat "+p)
		_, err = os.ReadFile(m.Path(p))
		wantErrno(t, err, unix.ENOENT, "open "+p)
	}
	if got := readFile(t, m.BackingPath(".realm-tmp-new")); got != "fresh" {
		t.Errorf("a temp name made after the mount was removed or changed: %q", got)
	}
	// Creating one through the mount is refused.
	for _, p := range []string{".realm-tmp-x", "sub/.realm-tmp-y"} {
		err := os.WriteFile(m.Path(p), []byte("x"), 0o644)
		if err == nil {
			t.Errorf("creating %s through the mount succeeded", p)
		} else {
			t.Logf("create %s: %v", p, err)
		}
		assertAbsent(t, m.BackingPath(p))
		err = unix.Mkdir(m.Path(p+"d"), 0o755)
		if err == nil {
			t.Errorf("mkdir %sd through the mount succeeded", p)
		}
		err = unix.Rename(m.Path("x"), m.Path(p))
		if err == nil {
			t.Errorf("rename x to %s through the mount succeeded", p)
		}
	}
	if got := readFile(t, m.BackingPath("x")); got != "x" {
		t.Errorf("x = %q", got)
	}
}

// TestReleaseDoesNotCommitANewerHandle: a process closes a file (close
// commits version v), reopens it at once without O_TRUNC and rewrites it
// in two halves. The kernel's RELEASE of the closed descriptor is
// asynchronous and can reach the daemon after the reopen; it must not commit
// the half-written content of the new descriptor: at every moment the file
// (as every other owner sees it, and as it stays after a crash) is exactly
// version v or v+1. Four writers on four files keep the daemon busy, which
// delays RELEASEs.
func TestReleaseDoesNotCommitANewerHandle(t *testing.T) {
	t.Parallel()
	const size, files, rounds = 64 << 10, 4, 300
	version := func(i, v int) []byte {
		line := fmt.Sprintf("file %d version %06d|", i, v)
		return []byte(strings.Repeat(line, size/len(line)+1)[:size])
	}
	m := mount(t, Prepare(func(m *Mount) {
		for i := range files {
			if err := os.WriteFile(m.BackingPath(fmt.Sprint("f", i)), version(i, 0), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}))
	var mixed atomic.Int64
	var wg sync.WaitGroup
	for i := range files {
		wg.Go(func() {
			name := fmt.Sprint("f", i)
			for v := 1; v <= rounds; v++ {
				fd, err := unix.Open(m.Path(name), unix.O_WRONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Error(err)
					return
				}
				data := version(i, v)
				for off := 0; off < size/2; off += 8 << 10 {
					if _, err := unix.Pwrite(fd, data[off:off+8<<10], int64(off)); err != nil {
						t.Error(err)
					}
				}
				got, err := os.ReadFile(m.BackingPath(name))
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, version(i, v-1)) {
					if mixed.Add(1) <= 3 {
						t.Errorf("%s write %d: half-way through the new descriptor's writes, BACKING holds not version %d "+
							"(starts %q, middle %q): the RELEASE of the previous descriptor committed the new one's partial content",
							name, v, v-1, got[:24], got[size/2:size/2+24])
					}
				}
				for off := size / 2; off < size; off += 8 << 10 {
					if _, err := unix.Pwrite(fd, data[off:off+8<<10], int64(off)); err != nil {
						t.Error(err)
					}
				}
				if err := unix.Close(fd); err != nil {
					t.Errorf("%s close %d: %v", name, v, err)
					return
				}
				if got := readFile(t, m.BackingPath(name)); got != string(data) {
					t.Errorf("after close %d: BACKING/%s is not version %d", v, name, v)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := mixed.Load(); n > 0 {
		t.Errorf("%d of %d rewrites exposed a mixed file", n, files*rounds)
	}
}
