package e2e

// The atomic write end to end, every test of it in this one file:
//
//   - the lock table between owners (issue 4): TestLockTwoOwners,
//     TestLockSameOwner, TestUnlinkWhileAnotherWrites;
//   - readers never see a partial write: TestReadersNeverSeePartial,
//     TestPassthroughReaderAndWriter;
//   - the commit's stages and their failures: TestCommitFailureStages,
//     TestENOSPC, TestConflictCopy, TestReleaseDoesNotCommitANewerHandle,
//     TestHardLinkWrite (a commit into a file with several links),
//     TestSetattrOnOpenWriteHandle;
//   - kill -9 of the daemon and the temp-residue sweep:
//     TestKill9DuringWrites, TestTempResidue;
//   - the commit points (issue 14): when a write through the mount is
//     committed. Every way programs write (shell redirects, dup, fork, cp,
//     tar, editors, sed -i, python, SQLite, git) takes a file from its old
//     content to its new content with nothing in between: a watcher reading
//     BACKING throughout sees only those (TestCommitPoints), kill -9 of
//     realmfs at any moment leaves one of them (TestKill9ShellRedirect,
//     TestKill9OtherWriters), and a writer killed by a signal while it
//     rewrites a file leaves the old one, its bytes in a recovery copy
//     (TestKilledWriterLeavesOldContent, TestCloseOnExecCommits; every
//     other kind of killed write is in killed_test.go).

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
	"syscall"
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
	m.WaitRefusal("", "f", "LOCK_CONFLICT", unix.EBUSY)

	if line := finish(); line != "close ok" {
		t.Errorf("holder: %q, want close ok", line)
	}
	if got := readFile(t, m.BackingPath("f")); got != "holder's bytes\n" {
		t.Errorf("f after the holder closed = %q", got)
	}
	// Now the other owner succeeds at once (the release is on its way:
	// realmfs waits for it).
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
// exactly the new content, whether readers pass through or read through
// the kernel's page cache (passthrough=off).
func TestReadersNeverSeePartial(t *testing.T) {
	t.Parallel()
	for _, pt := range []string{"on", "off"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			t.Parallel()
			readersNeverSeePartial(t, "passthrough="+pt)
		})
	}
}

func readersNeverSeePartial(t *testing.T, opt string) {
	const size = 100 << 20
	m := mount(t, Opts("lockowner=pid", opt), Prepare(func(m *Mount) {
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
		for _, n := range []string{"inplace", "replaced", "viafsync", "again"} {
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
		// Replaced by rename, then written again through the same
		// descriptor after the EBUSY: the write lands on the outside
		// version, which must not be lost to the version first opened.
		{"again", func(p string) error {
			if err := os.WriteFile(p+".new", []byte("outside again\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(p+".new", p)
		}, true},
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
		want := "outside " + tc.name + "\n"
		if tc.fsync {
			wantErrno(t, unix.Fsync(fd), unix.EBUSY, tc.name+": fsync after an outside change")
			if tc.name == "again" {
				if _, err := unix.Pwrite(fd, []byte("O"), 0); err != nil {
					t.Fatal(err)
				}
				if err := unix.Fsync(fd); err != nil {
					t.Errorf("again: fsync of a write after the conflict: %v", err)
				}
				want = "O" + want[1:]
			}
			unix.Close(fd)
		} else {
			wantErrno(t, unix.Close(fd), unix.EBUSY, tc.name+": close after an outside change")
		}
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
// writes, REALM_KILL_ROUNDS times (50; make test 20), each followed by a
// remount: every file is exactly its last committed or its in-flight
// version, and the sweep at mount leaves no temp behind.
func TestKill9DuringWrites(t *testing.T) {
	t.Parallel()
	const files = 4
	rounds := envInt(t, "REALM_KILL_ROUNDS", 50)
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
		deadline := time.Now().Add(stateTimeout)
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
	}))
	deadline := time.Now().Add(stateTimeout)
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
	for deadline := time.Now().Add(stateTimeout); ; {
		log, _ := os.ReadFile(m.LogFile)
		if strings.Contains(string(log), "crash_temps_removed=2") {
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

// TestHardLinkWrite: a write through one name of a hard-linked file is seen
// through the other name (one inode), through the mount and in BACKING.
func TestHardLinkWrite(t *testing.T) {
	t.Parallel()
	m := mount(t)
	writeFile(t, m.Path("f"), "old\n")
	if err := os.Link(m.Path("f"), m.Path("g")); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"f", "g"} {
		want := fmt.Sprintf("new %d via %s\n", i, name)
		writeFile(t, m.Path(name), want)
		for _, other := range []string{"f", "g"} {
			if got := readFile(t, m.Path(other)); got != want {
				t.Errorf("after writing %q through %s: %s reads %q through the mount", want, name, other, got)
			}
			if got := readFile(t, m.BackingPath(other)); got != want {
				t.Errorf("after writing %q through %s: BACKING %s holds %q", want, name, other, got)
			}
		}
	}
	if f, g := lstat(t, m.BackingPath("f")), lstat(t, m.BackingPath("g")); f.Ino != g.Ino || f.Nlink != 2 {
		t.Errorf("BACKING f and g: inodes %d and %d, nlink %d; want one inode with nlink 2", f.Ino, g.Ino, f.Nlink)
	}
}

// TestSetattrOnOpenWriteHandle: what tar, cp -a and mv do when they write a
// file: create, write, then fchmod, fchown, futimens or ftruncate on the
// still-open descriptor, then close. Each sequence runs on a native dir and
// through the mount; outcomes, content, mode, owner and mtime must agree.
func TestSetattrOnOpenWriteHandle(t *testing.T) {
	t.Parallel()
	m := mount(t)
	native := filepath.Join(m.Root, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := unix.NsecToTimespec(time.Date(2003, 4, 5, 6, 7, 8, 0, time.UTC).UnixNano())
	steps := []struct {
		name string
		fn   func(fd int) error
	}{
		{"fchmod", func(fd int) error { return unix.Fchmod(fd, 0o640) }},
		{"fchown", func(fd int) error { return unix.Fchown(fd, nobody, nobody) }},
		{"futimens", func(fd int) error {
			return unix.UtimesNanoAt(fd, "", []unix.Timespec{ts, ts}, unix.AT_EMPTY_PATH)
		}},
		{"ftruncate", func(fd int) error { return unix.Ftruncate(fd, 4) }},
	}
	do := func(dir, name string, fn func(int) error) string {
		p := filepath.Join(dir, name)
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return "open: " + errnoName(errnoOf(err))
		}
		_, werr := unix.Write(fd, []byte("content"))
		serr := fn(fd)
		cerr := unix.Close(fd)
		b, rerr := os.ReadFile(p)
		var st unix.Stat_t
		_ = unix.Lstat(p, &st)
		out := fmt.Sprintf("write %s, %s %s, close %s, read %q %s, mode %o owner %d:%d",
			errnoName(errnoOf(werr)), name, errnoName(errnoOf(serr)), errnoName(errnoOf(cerr)),
			b, errnoName(errnoOf(rerr)), st.Mode&0o7777, st.Uid, st.Gid)
		if name == "futimens" { // other steps leave the mtime at "now", which differs
			out += fmt.Sprintf(" mtime %d", st.Mtim.Sec)
		}
		return out
	}
	for _, st := range steps {
		want := do(native, st.name, st.fn)
		if got := do(m.Dir, st.name, st.fn); got != want {
			t.Errorf("create, write, %s, close:\nmount:  %s\nnative: %s", st.name, got, want)
		}
		if st.name != "futimens" {
			continue
		}
		if b := lstat(t, m.BackingPath(st.name)); b.Mtim != ts {
			t.Errorf("BACKING futimens: mtime %v, want %v", b.Mtim, ts)
		}
	}
}

// The commit points (issue 14).

// watchBacking reads path (in BACKING, not through the mount) in a loop
// until the returned stop is called, and returns every distinct content it
// saw that ok rejects. A missing file is content nil.
func watchBacking(path string, ok func([]byte) bool) (stop func() []string) {
	var done atomic.Bool
	var bad []string
	seen := map[string]bool{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			b, err := os.ReadFile(path)
			if err != nil {
				b = nil
			}
			if !ok(b) && !seen[string(b)] {
				seen[string(b)] = true
				bad = append(bad, fmt.Sprintf("%d bytes %q", len(b), clip(string(b))))
			}
		}
	})
	return func() []string {
		done.Store(true)
		wg.Wait()
		return bad
	}
}

// shell runs script with sh in dir and fails the test if it fails.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	return run(t, dir, nil, "sh", "-c", script)
}

// writerCase is one way of rewriting the file f. It runs in the mount's
// directory with f holding old; afterwards f must hold want, and a reader of
// BACKING must never have seen anything but old, want or what also allows.
type writerCase struct {
	name  string
	old   string
	want  string
	tools []string
	setup func(t *testing.T, m *Mount) // before the write, in BACKING
	write func(t *testing.T, m *Mount)
	also  func(b []byte) bool
}

func writerCases() []writerCase {
	big := strings.Repeat("N", 1<<20)
	py := func(src string) func(*testing.T, *Mount) {
		return func(t *testing.T, m *Mount) { t.Helper(); run(t, m.Dir, nil, "python3", "-c", src) }
	}
	sh := func(script string) func(*testing.T, *Mount) {
		return func(t *testing.T, m *Mount) { t.Helper(); shell(t, m.Dir, script) }
	}
	return []writerCase{
		{name: "redirect", old: "old\n", want: big,
			write: sh(`head -c 1048576 /dev/zero | tr '\0' N > f`)},
		{name: "redirect of nothing", old: "old\n", want: "",
			write: sh(`: > f`)},
		// Appends go into the file in place, each write whole: a reader
		// sees them one by one (README, "Atomic writes").
		{name: "append", old: "old\n", want: "old\nab",
			write: sh(`{ printf a; sleep 0.05; printf b; } >> f`),
			also:  func(b []byte) bool { return string(b) == "old\na" }},
		{name: "exec 3>", old: "old\n", want: "ab",
			write: sh(`exec 3>f; printf a >&3; sleep 0.05; printf b >&3; sleep 0.05; exec 3>&-`)},
		{name: "2>&1", old: "old\n", want: "outerrout",
			write: sh(`{ printf out; sleep 0.05; printf err >&2; sleep 0.05; printf out; } > f 2>&1`)},
		{name: "dup2 then close the first", old: "old\n", want: "xy", write: py(`
import os, time
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
fd2 = os.dup(fd)
os.close(fd)
os.write(fd2, b"x"); time.sleep(0.05); os.write(fd2, b"y")
os.close(fd2)`)},
		{name: "two writers of one owner", old: "old\n", want: "AAAAB1B2", write: func(t *testing.T, m *Mount) {
			// A's last close comes while B, which opened f itself, is half
			// way through: it must not commit B's half.
			out := run(t, m.Dir, nil, "python3", "-c", `
import os, sys
go, a_wrote = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:
    os.read(go[0], 1)
    fd = os.open("f", os.O_WRONLY)
    os.pwrite(fd, b"B1", 4)
    os.write(a_wrote[1], b"x")
    os.read(go[0], 1)
    os.pwrite(fd, b"B2", 6)
    os.close(fd)
    os._exit(0)
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"AAAA")
os.write(go[1], b"x")
os.read(a_wrote[0], 1)
os.close(fd)
print(open(sys.argv[1]).read(), end="")
os.write(go[1], b"x")
os.waitpid(pid, 0)`, m.BackingPath("f"))
			if out != "old\n" {
				t.Errorf("after the first writer's close BACKING holds %q, want the old content until the second's", out)
			}
		}},
		{name: "a reader of the writer's owner", old: "old\n", want: "AAAABB", write: func(t *testing.T, m *Mount) {
			// B reads the owner's uncommitted bytes; its close must not
			// commit them while A writes on.
			out := run(t, m.Dir, nil, "python3", "-c", `
import os, subprocess, sys
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"AAAA")
seen = subprocess.run(["cat", "f"], capture_output=True, check=True).stdout
print(seen.decode(), open(sys.argv[1]).read(), sep="|", end="")
os.write(fd, b"BB")
os.close(fd)`, m.BackingPath("f"))
			if out != "AAAA|old\n" {
				t.Errorf("the reader saw and then BACKING held %q, want \"AAAA|old\\n\"", out)
			}
		}},
		{name: "fork inherits the descriptor", old: "old\n", want: "p1cp2", write: py(`
import os, time
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"p1")
pid = os.fork()
if pid == 0:
    time.sleep(0.02); os.write(fd, b"c"); os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.05)
os.write(fd, b"p2")
os.close(fd)`)},
		{name: "subprocess stdout", old: "old\n", want: "ab", write: py(`
import subprocess
with open("f", "w") as fh:
    subprocess.run(["sh", "-c", "printf a; sleep 0.05; printf b"], stdout=fh, check=True)`)},
		{name: "python open w", old: "old\n", want: big, write: py(`
with open("f", "w") as fh:
    for i in range(16):
        fh.write("N" * 65536); fh.flush()`)},
		{name: "cp", old: "old\n", want: big,
			setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("src"), big) },
			write: sh(`cp src f`)},
		{name: "dd conv=fsync", old: "old\n", want: big,
			setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("src"), big) },
			write: sh(`dd if=src of=f bs=4096 conv=fsync status=none`)},
		{name: "tar x", old: "old\n", want: big, tools: []string{"tar"},
			setup: func(t *testing.T, m *Mount) {
				dir := filepath.Join(m.Outside, "tarsrc")
				os.MkdirAll(dir, 0o755)
				writeFile(t, filepath.Join(dir, "f"), big)
				run(t, dir, nil, "tar", "cf", filepath.Join(m.Outside, "a.tar"), "f")
			},
			write: func(t *testing.T, m *Mount) { run(t, m.Dir, nil, "tar", "xf", filepath.Join(m.Outside, "a.tar")) },
			// tar unlinks the old file and creates the new one: its name
			// is absent, then an empty new file, as on any filesystem.
			also: func(b []byte) bool { return len(b) == 0 }},
		{name: "sed -i", old: strings.Repeat("O", 1<<20), want: big,
			write: sh(`sed -i s/O/N/g f`)},
		{name: "vim write in place", old: strings.Repeat("O", 1<<16) + "\n", want: strings.Repeat("N", 1<<16) + "\n", tools: []string{"vim.tiny"},
			write: sh(`vim.tiny -u NONE -i NONE -N -n -E -s -c 'set backupcopy=yes' -c '%s/O/N/g' -c 'wq' f`)},
		{name: "vim write by rename", old: strings.Repeat("O", 1<<16) + "\n", want: strings.Repeat("N", 1<<16) + "\n", tools: []string{"vim.tiny"},
			write: sh(`vim.tiny -u NONE -i NONE -N -n -E -s -c 'set backupcopy=no writebackup' -c '%s/O/N/g' -c 'wq' f`)},
	}
}

// TestCommitPoints: for every way of writing, a reader of BACKING sees the
// file's old content until the writer is done and its new content after,
// never anything in between (an empty file above all), and the new content
// is there when the writer has exited.
func TestCommitPoints(t *testing.T) {
	t.Parallel()
	for _, tc := range writerCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireTool(t, tc.tools...)
			m := mount(t, Prepare(func(m *Mount) {
				writeFile(t, m.BackingPath("f"), tc.old)
				if tc.setup != nil {
					tc.setup(t, m)
				}
			}))
			stop := watchBacking(m.BackingPath("f"), func(b []byte) bool {
				return b != nil && (string(b) == tc.old || string(b) == tc.want) || tc.also != nil && tc.also(b)
			})
			tc.write(t, m)
			if bad := stop(); len(bad) > 0 {
				t.Errorf("a reader of BACKING saw states other than the old and the new content: %v", bad)
			}
			if got := readFile(t, m.BackingPath("f")); got != tc.want {
				t.Errorf("after the writer: BACKING holds %d bytes %q, want %d bytes %q", len(got), clip(got), len(tc.want), clip(tc.want))
			}
			if got := readFile(t, m.Path("f")); got != tc.want {
				t.Errorf("after the writer: the mount shows %d bytes %q", len(got), clip(got))
			}
			waitNoTemp(t, m)
		})
	}
}

// waitNoTemp waits for the last release of every handle (sent after close
// returns) and fails if a temp stays behind.
func waitNoTemp(t *testing.T, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for len(tempResidue(t, m.Backing)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoTemp(t, m.Backing, "after the writers exited")
}

// letterFile reports whether b is size bytes of one letter, and which.
func letterFile(b []byte, size int) (byte, bool) {
	if len(b) != size || size == 0 {
		return 0, false
	}
	if bytes.Count(b, b[:1]) != size {
		return 0, false
	}
	return b[0], true
}

// TestKill9ShellRedirect is the report behind issue 14: a shell loop
// rewrites 4 files with `head | tr > f` while realmfs is killed with
// kill -9 at a random moment, REALM_KILL_ROUNDS times (50; make test 20).
// Every file is whole, old or new, after every kill (never empty), and no
// temp survives the next mount.
func TestKill9ShellRedirect(t *testing.T) {
	t.Parallel()
	const files, size = 4, 2 << 20
	rounds := envInt(t, "REALM_KILL_ROUNDS", 50)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	m := mount(t, Prepare(func(m *Mount) {
		for i := range files {
			writeFile(t, m.BackingPath(fmt.Sprintf("k%d", i)), strings.Repeat("A", size))
		}
	}))
	script := fmt.Sprintf(`for l in B C D E F G H I J K L M N O P Q R S T U V W X Y Z; do
  for n in 0 1 2 3; do head -c %d /dev/zero | tr '\0' $l > k$n || exit 1; done
done`, size)
	changed := 0
	for round := range rounds {
		stop := startLoop(t, m.Dir, nil, script)
		time.Sleep(time.Duration(rng.IntN(80)+5) * time.Millisecond)
		if stuck := m.KillWithin(3 * time.Second); stuck != "" {
			t.Errorf("round %d: %s", round, stuck)
		}
		stop()
		for i := range files {
			b, err := os.ReadFile(m.BackingPath(fmt.Sprintf("k%d", i)))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			l, ok := letterFile(b, size)
			if !ok {
				t.Fatalf("round %d: k%d is torn or emptied: %d bytes, starts %q", round, i, len(b), clip(string(b)))
			}
			if l != 'A' {
				changed++
			}
		}
		m.Restart()
		waitNoTemp(t, m)
	}
	t.Logf("%d of %d files had a new version at their kill", changed, rounds*files)
}

// TestKill9OtherWriters: the same kill -9 of realmfs during loops of the
// other writers: python, cp, sed -i, exec 3>, SQLite in rollback-journal
// and WAL mode, git. Each leaves old or new whole content; SQLite's
// database passes its integrity check with every transaction whole; git's
// repository passes fsck.
func TestKill9OtherWriters(t *testing.T) {
	t.Parallel()
	const size = 256 << 10
	letters := func(n int) string {
		return strings.Repeat("X", n)
	}
	wholeLetters := func(t *testing.T, m *Mount) {
		b, err := os.ReadFile(m.BackingPath("f"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := letterFile(b, size); !ok {
			t.Fatalf("f is torn or emptied: %d bytes, starts %q", len(b), clip(string(b)))
		}
	}
	sqliteWhole := func(t *testing.T, m *Mount) {
		out := run(t, m.Backing, nil, "sqlite3", "db", "PRAGMA integrity_check; SELECT count(*) = (SELECT n FROM c) FROM t;")
		if out != "ok\n1\n" {
			t.Fatalf("after the kill: integrity_check and row count: %q, want ok and 1", out)
		}
	}
	for _, tc := range []struct {
		name  string
		tools []string
		setup func(t *testing.T, m *Mount)
		loop  string
		check func(t *testing.T, m *Mount)
	}{
		{name: "python", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop:  fmt.Sprintf(`while :; do for l in B C D E; do python3 -c "open('f','w').write('$l' * %d)" || exit 1; done; done`, size),
			check: wholeLetters},
		{name: "cp", setup: func(t *testing.T, m *Mount) {
			writeFile(t, m.BackingPath("f"), letters(size))
			for _, l := range "BCDE" {
				writeFile(t, m.BackingPath("src"+string(l)), strings.Repeat(string(l), size))
			}
		}, loop: `while :; do for l in B C D E; do cp src$l f || exit 1; done; done`, check: wholeLetters},
		{name: "sed -i", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop: `while :; do sed -i s/X/Y/g f && sed -i s/Y/X/g f || exit 1; done`, check: wholeLetters},
		{name: "exec 3>", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop:  fmt.Sprintf(`while :; do for l in B C D E; do exec 3>f; head -c %d /dev/zero | tr '\0' $l >&3; exec 3>&-; done; done`, size),
			check: wholeLetters},
		{name: "sqlite rollback journal", tools: []string{"sqlite3"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "sqlite3", "db", "CREATE TABLE t(x); CREATE TABLE c(n); INSERT INTO c VALUES(0);")
		}, loop: `while :; do sqlite3 db "BEGIN; INSERT INTO t VALUES(randomblob(3000)); UPDATE c SET n = n + 1; COMMIT;" || exit 1; done`,
			check: sqliteWhole},
		{name: "sqlite wal", tools: []string{"sqlite3"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "sqlite3", "db", "PRAGMA journal_mode=WAL; CREATE TABLE t(x); CREATE TABLE c(n); INSERT INTO c VALUES(0);")
		}, loop: `while :; do sqlite3 db "PRAGMA journal_mode=WAL; BEGIN; INSERT INTO t VALUES(randomblob(3000)); UPDATE c SET n = n + 1; COMMIT;" >/dev/null || exit 1; done`,
			check: sqliteWhole},
		{name: "git", tools: []string{"git"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "git", "init", "-q")
			writeFile(t, m.BackingPath("f"), "0\n")
			run(t, m.Backing, gitEnv, "git", "add", "f")
			run(t, m.Backing, gitEnv, "git", "commit", "-q", "-m", "0")
		}, loop: `i=0; while :; do i=$((i+1)); echo $i > f; git add f && git commit -q -m $i || exit 1; done`,
			check: func(t *testing.T, m *Mount) {
				// A git killed half way leaves its lock behind, natively too.
				os.Remove(m.BackingPath(".git", "index.lock"))
				os.Remove(m.BackingPath(".git", "HEAD.lock"))
				os.Remove(m.BackingPath(".git", "refs", "heads", "master.lock"))
				os.Remove(m.BackingPath(".git", "refs", "heads", "main.lock"))
				if out, err := runErr(t, m.Backing, gitEnv, "git", "fsck", "--no-dangling", "--no-progress"); err != nil {
					t.Fatalf("git fsck after the kill: %v\n%s", err, out)
				}
				run(t, m.Backing, gitEnv, "git", "log", "-1", "--format=%s")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireTool(t, tc.tools...)
			const rounds = 8
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 3))
			m := mount(t, Prepare(func(m *Mount) { tc.setup(t, m) }))
			for round := range rounds {
				stop := startLoop(t, m.Dir, gitEnv, tc.loop)
				time.Sleep(time.Duration(rng.IntN(150)+20) * time.Millisecond)
				if stuck := m.KillWithin(3 * time.Second); stuck != "" {
					t.Errorf("round %d: %s", round, stuck)
				}
				stop()
				clearStrays(t, m)
				tc.check(t, m)
				m.Restart()
				waitNoTemp(t, m)
			}
		})
	}
}

// clearStrays removes what a writer that outlived its mount made in the
// bare mountpoint once the dead mount was detached: sqlite3 opens its
// database by the absolute path it builds from getcwd(), so one that
// resolved the mount's path before the detach and opened after it makes
// db and db-journal in the directory beneath (natively so: the mount is
// gone). The next mount would refuse the non-empty mountpoint. The
// writers are dead by now (stop waited for them).
func clearStrays(t *testing.T, m *Mount) {
	t.Helper()
	if m.Mounted() {
		return
	}
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Logf("a writer that outlived the mount made %s in the bare mountpoint: removed", e.Name())
		if err := os.RemoveAll(filepath.Join(m.Dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// gitEnv makes git work without a user configuration.
var gitEnv = []string{"GIT_AUTHOR_NAME=realm", "GIT_AUTHOR_EMAIL=realm@example.invalid",
	"GIT_COMMITTER_NAME=realm", "GIT_COMMITTER_EMAIL=realm@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}

// TestKilledWriterLeavesOldContent: a writer killed by a signal before it
// closes the file it rewrites does not commit what it wrote: the file keeps
// its old content, the bytes are kept beside it as a recovery copy, and
// the daemon logs why (e2e/killed_test.go has every kind of write). A
// writer that exits normally commits what it wrote, as close(2) at exit
// says it is done.
func TestKilledWriterLeavesOldContent(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		for _, f := range []string{"py9", "py15", "sh9", "pyexit"} {
			writeFile(t, m.BackingPath(f), "old "+f+"\n")
		}
	}))
	pyWriter := `
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"half of the new")
print("ready", flush=True)
if sys.argv[2] == "exit":
    os._exit(0)
time.sleep(60)`
	for _, tc := range []struct {
		file      string
		cmd       []string
		sig       syscall.Signal
		want      string
		recovered string // "": not killed, committed
	}{
		{"py9", []string{"python3", "-c", pyWriter, "py9", "sleep"}, syscall.SIGKILL, "old py9\n", "half of the new"},
		{"py15", []string{"python3", "-c", pyWriter, "py15", "sleep"}, syscall.SIGTERM, "old py15\n", "half of the new"},
		{"sh9", []string{"sh", "-c", `exec sh -c 'printf partial; echo ready >&2; exec sleep 60' > sh9`}, syscall.SIGKILL, "old sh9\n", "partial"},
		{"pyexit", []string{"python3", "-c", pyWriter, "pyexit", "exit"}, 0, "half of the new", ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, tc.cmd[0], tc.cmd[1:]...)
		cmd.Dir = m.Dir
		errOut, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		writer := startProc(t, cmd, true)
		ready := make(chan string, 2)
		for _, r := range []io.Reader{writer.stdout, errOut} {
			go func() {
				buf := make([]byte, 64)
				n, _ := r.Read(buf)
				ready <- string(buf[:max(n, 0)])
			}()
		}
		// One of the two pipes says ready; the other may close at once.
		got := ""
		for range 2 {
			if got += <-ready; strings.Contains(got, "ready") {
				break
			}
		}
		if !strings.Contains(got, "ready") {
			t.Fatalf("%s: writer said %q, want ready", tc.file, got)
		}
		if tc.sig != 0 {
			cmd.Process.Signal(tc.sig)
		}
		writer.wait()
		cancel()
		waitNoTemp(t, m)
		if got := readFile(t, m.BackingPath(tc.file)); got != tc.want {
			t.Errorf("%s after its writer was killed by %v: BACKING holds %q, want %q", tc.file, tc.sig, got, tc.want)
		}
		if got := readFile(t, m.Path(tc.file)); got != tc.want {
			t.Errorf("%s: the mount shows %q, want %q", tc.file, got, tc.want)
		}
		logged := strings.Contains(readFile(t, m.LogFile), tc.file+": not committed: its writer")
		if logged != (tc.recovered != "") {
			t.Errorf("%s: daemon log says it was not committed: %v, want %v\n%s", tc.file, logged, tc.recovered != "", m.logTail())
		}
		copies, _ := filepath.Glob(m.BackingPath(tc.file + ".realm-recovered-*"))
		switch {
		case tc.recovered == "" && len(copies) > 0:
			t.Errorf("%s: recovery copies %q of a committed write", tc.file, copies)
		case tc.recovered != "" && len(copies) != 1:
			t.Errorf("%s: recovery copies %q, want one", tc.file, copies)
		case tc.recovered != "":
			if got := readFile(t, copies[0]); got != tc.recovered {
				t.Errorf("%s: recovery copy holds %q, want %q", tc.file, got, tc.recovered)
			}
		}
	}
}

// TestCloseOnExecCommits: an opener whose descriptor is closed by its own
// execve commits there (the new program already sees the new content), and
// the daemon, reading the closing thread's descriptor table, does not
// deadlock with the exec.
func TestCloseOnExecCommits(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
	out := run(t, m.Dir, nil, "python3", "-c", `
import os
fd = os.open("f", os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
os.write(fd, b"new\n")
os.execv("/bin/cat", ["cat", "f"])`)
	if out != "new\n" {
		t.Errorf("the exec'd program read %q, want the committed new content", out)
	}
	// A child that inherited the descriptor and execs commits nothing; the
	// opener's close does.
	out = run(t, m.Dir, nil, "python3", "-c", `
import os, subprocess
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"newer\n")
print(subprocess.run(["cat", "f"], pass_fds=[fd], capture_output=True).stdout.decode(), end="")
os.close(fd)
print(open("f").read(), end="")`)
	if out != "newer\nnewer\n" {
		t.Errorf("got %q: the opener sees its own bytes before its close, and after it", out)
	}
	if got := readFile(t, m.BackingPath("f")); got != "newer\n" {
		t.Errorf("BACKING holds %q", got)
	}
}

// TestPassthroughReaderAndWriter: process A holds a file open read-only
// (served by kernel passthrough as root) while B opens it for writing,
// writes and closes, as the same lock owner and as another. B's write
// succeeds and goes through a temp (BACKING's file is replaced, A's
// original is untouched); A keeps reading what it opened, as a descriptor
// of a file replaced by rename does; a new reader sees the new content;
// nobody gets an error.
func TestPassthroughReaderAndWriter(t *testing.T) {
	t.Parallel()
	for _, owner := range []string{"cgroup", "pid"} {
		t.Run(owner, func(t *testing.T) {
			t.Parallel()
			m := mount(t, Opts("lockowner="+owner), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
			before := lstat(t, m.BackingPath("f"))
			reader := startReader(t, m.Path("f"))
			if got := reader("read"); got != "old\n" {
				t.Fatalf("A read %q before the write", got)
			}
			inMount := func(script string) func() error {
				return func() error {
					cmd := exec.Command("sh", "-c", script)
					cmd.Dir = m.Dir
					return cmd.Run()
				}
			}
			for i, w := range []func() error{
				inMount("echo new > f"),
				func() error { return os.WriteFile(m.Path("f"), []byte("newer\n"), 0o644) },
				inMount("echo newest >> f"),
			} {
				if err := w(); err != nil {
					t.Errorf("write %d while A holds f open: %v", i, err)
				}
			}
			const want = "newer\nnewest\n"
			if got := readFile(t, m.BackingPath("f")); got != want {
				t.Errorf("BACKING holds %q, want %q", got, want)
			}
			if after := lstat(t, m.BackingPath("f")); after.Ino == before.Ino {
				t.Errorf("BACKING's f kept its inode %d: the write went into the file, not through a temp", after.Ino)
			}
			if got := reader("read"); got != "old\n" {
				t.Errorf("A reads %q after the writes, want what it opened (old)", got)
			}
			if got := readFile(t, m.Path("f")); got != want {
				t.Errorf("a new reader reads %q, want %q", got, want)
			}
			// A reader opened while a writer holds f, then the commit. A
			// reader of the writer's own owner sees its uncommitted bytes.
			finish := holdWrite(t, m.Path("f"), "held\n")
			r2 := startReader(t, m.Path("f"))
			wantR2 := want
			if owner == "cgroup" {
				wantR2 = "held\n"
			}
			if got := r2("read"); got != wantR2 {
				t.Errorf("a reader opened while f is written reads %q, want %q", got, wantR2)
			}
			if line := finish(); line != "close ok" {
				t.Errorf("writer: %q", line)
			}
			if got := r2("read"); got != wantR2 {
				t.Errorf("that reader after the commit reads %q, want %q", got, wantR2)
			}
			if got := readFile(t, m.Path("f")); got != "held\n" {
				t.Errorf("a new reader after the commit reads %q", got)
			}
			reader("quit")
			r2("quit")
		})
	}
}

// TestUnlinkWhileAnotherWrites: removing a file another lock owner is
// writing is refused (EBUSY, LOCK_CONFLICT) and loses nothing; the owner
// writing it may remove it (its bytes go with the file, as natively); once
// the writer is done, anyone may.
func TestUnlinkWhileAnotherWrites(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
	finish := holdWrite(t, m.Path("f"), "writer's bytes\n")
	var err error
	lockedThread(func() { err = os.Remove(m.Path("f")) })
	wantErrno(t, err, unix.EBUSY, "unlink by another owner while f is written")
	m.WaitRefusal("unlink", "f", "LOCK_CONFLICT", unix.EBUSY)
	if line := finish(); line != "close ok" {
		t.Errorf("writer: %q", line)
	}
	if got := readFile(t, m.BackingPath("f")); got != "writer's bytes\n" {
		t.Errorf("f after the refused unlink and the writer's close: %q", got)
	}
	if err := os.Remove(m.Path("f")); err != nil {
		t.Errorf("unlink once the writer is done: %v", err)
	}
	// The writer itself may remove the file it writes.
	out := run(t, m.Dir, nil, "python3", "-c", `
import os
fd = os.open("g", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b"bytes")
os.unlink("g")
os.close(fd)
print(os.path.exists("g"))`)
	if out != "False\n" {
		t.Errorf("the writer unlinking its own file: %q", out)
	}
	assertAbsent(t, m.BackingPath("g"))
	waitNoTemp(t, m)
}

// TestViewsOfAFileBeingWritten: while an owner writes a file, the kernel
// holds one size for it, and every other view (a lookup of the name, a
// listing, another owner's stat or read) must neither move where the
// writer's bytes go nor show another owner less than the committed file.
// Each case runs on a mount with passthrough on and off (off: plain readers
// share the kernel's page cache, as on kernels before 6.9 and under a
// daemon that is not root), with each process its own lock owner.
func TestViewsOfAFileBeingWritten(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3", "bash", "stat", "ls")
	for _, tc := range []struct {
		name  string
		old   string
		want  string // f in BACKING afterwards
		sh    string // run in the mount; its output must be wantOut
		wantO string
	}{
		{name: "appends through a held descriptor around a listing", old: "old\n", want: "old\na\nb\n",
			sh: `exec 3>>f; echo a >&3; touch "$BACKING/g"; poll listed g || exit 1; ls -l >/dev/null; echo b >&3; exec 3>&-`},
		{name: "appends through a held descriptor around another owner's fstat", old: "old\n", want: "old\na\nb\nc\n",
			sh: `python3 -c '
import os, subprocess
r = os.open("f", os.O_RDONLY)
wrote_r, wrote_w = os.pipe()
go_r, go_w = os.pipe()
w = subprocess.Popen(["bash", "-c", "exec 3>>f; echo a >&3; echo >&%d; read <&%d; echo b >&3; echo >&%d; read <&%d; echo c >&3; exec 3>&-"
                      % (wrote_w, go_r, wrote_w, go_r)], pass_fds=(wrote_w, go_r))
os.close(wrote_w); os.close(go_r)
for _ in range(2):
    assert os.read(wrote_r, 1) == b"\n", "the writer died"
    os.fstat(r)
    os.write(go_w, b"\n")
w.wait(); os.close(r)'`},
		{name: "another owner reads a file held truncated", old: "old\n", want: "new\n", wantO: "old\nold\n",
			sh: `cat f >/dev/null; mkfifo "$SYNC/opened" "$SYNC/go"
bash -c 'exec 3>f; echo >"$SYNC/opened"; read <"$SYNC/go"; echo new >&3; exec 3>&-' &
read <"$SYNC/opened"; cat f; python3 -c 'print(open("f").read(), end="")'; echo >"$SYNC/go"; wait`},
		{name: "seek to the end after a listing", old: "old\n", want: "old\na\nb\n",
			sh: `python3 - <<'PY'
import os, subprocess
f = open("f", "r+b", buffering=0)
f.seek(0, 2); f.write(b"a\n")
subprocess.run(["touch", os.environ["BACKING"] + "/g"], check=True)
subprocess.run(["bash", "-c", "poll listed g && ls -l >/dev/null && stat f >/dev/null"], check=True)
f.seek(0, 2); f.write(b"b\n")
f.close()
PY`},
		{name: "a reader holds the file across another owner's truncating write", old: "old\n", want: "new\n",
			wantO: "old\n|old\n|old\n|new\n",
			sh: `python3 - <<'PY'
import os, subprocess
r = open("f", "rb", buffering=0)
first = r.read()
opened_r, opened_w = os.pipe()
go_r, go_w = os.pipe()
w = subprocess.Popen(["bash", "-c", "exec 3>f; echo >&%d; read <&%d; echo new >&3; exec 3>&-" % (opened_w, go_r)],
                     pass_fds=(opened_w, go_r))
os.close(opened_w); os.close(go_r)
assert os.read(opened_r, 1) == b"\n", "the writer died"
again = os.pread(r.fileno(), 100, 0)
fresh = open("f", "rb").read()
os.write(go_w, b"\n")
w.wait()
print(first.decode(), again.decode(), fresh.decode(), open("f").read(), sep="|", end="")
PY`},
	} {
		for _, pt := range []string{"on", "off"} {
			t.Run(tc.name+"/passthrough="+pt, func(t *testing.T) {
				t.Parallel()
				m := mount(t, Opts("lockowner=pid", "passthrough="+pt), Prepare(func(m *Mount) {
					writeFile(t, m.BackingPath("f"), tc.old)
				}))
				// SYNC holds the cases' FIFOs; BASH_ENV gives every bash
				// the poll function (pollShell).
				env := []string{"BACKING=" + m.Backing, "SYNC=" + m.Outside, "BASH_ENV=" + pollShell(t, m)}
				out := run(t, m.Dir, env, "bash", "-c", tc.sh)
				if out != tc.wantO {
					t.Errorf("the script printed %q, want %q", out, tc.wantO)
				}
				if got := readFile(t, m.BackingPath("f")); got != tc.want {
					t.Errorf("f = %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// pollShell writes, outside the mount, a bash file (for BASH_ENV) that
// defines the scripts' one way to wait for a state no process announces:
// `poll CMD...` runs CMD until it succeeds, failing after a minute, and
// `listed NAME` holds once a listing of the current directory shows NAME
// (a change made in BACKING that the daemon passed on to the kernel).
func pollShell(t *testing.T, m *Mount) string {
	t.Helper()
	p := filepath.Join(m.Outside, "poll.bash")
	writeFile(t, p, `poll() {
	local end=$((SECONDS + 60))
	until "$@"; do
		if ((SECONDS > end)); then echo "poll: $* did not hold within a minute" >&2; return 1; fi
		sleep 0.01
	done
}
listed() { ls -a | grep -qxF -- "$1"; }
`)
	return p
}

// TestRewriteWhileAnotherOwnerReads: one owner rewrites a file over and
// over (open O_TRUNC, write in pieces, close) while another reads it in a
// loop. Every read is exactly one committed version, the writer's opens
// never fail (the kernel fails an open made beside a passthrough reader,
// and retries an ESTALE only once), and BACKING ends as a whole version.
// Found by this loop: BACKING emptied by a failed open's O_TRUNC, readers
// through the page cache stopping at the writer's size, opens failing with
// EIO and ESTALE.
func TestRewriteWhileAnotherOwnerReads(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	const loop = `
import os, sys, time
mode, secs = sys.argv[1], float(sys.argv[2])
A, B = b"A" * 300000, b"B" * 123457
end = time.time() + secs
n = bad = 0
while time.time() < end:
    if mode == "writer":
        fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
        data = A if n % 2 == 0 else B
        for k in range(0, len(data), 65536):
            os.write(fd, data[k:k + 65536])
        os.close(fd)
    else:
        with open("f", "rb") as f:
            d = f.read()
        if d not in (A, B, b"old\n"):
            bad += 1
            print("read %d bytes starting %r ending %r" % (len(d), d[:1], d[-1:]))
    n += 1
print(mode, n, "bad", bad)
`
	for _, pt := range []string{"on", "off"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			t.Parallel()
			m := mount(t, Opts("lockowner=pid", "passthrough="+pt), Prepare(func(m *Mount) {
				writeFile(t, m.BackingPath("f"), "old\n")
			}))
			writer := exec.Command("python3", "-c", loop, "writer", "3")
			writer.Dir = m.Dir
			var wout bytes.Buffer
			writer.Stdout, writer.Stderr = &wout, &wout
			if err := writer.Start(); err != nil {
				t.Fatal(err)
			}
			rout, rerr := runErr(t, m.Dir, nil, "python3", "-c", loop, "reader", "3")
			werr := writer.Wait()
			if werr != nil {
				t.Errorf("the writer failed: %v\n%s", werr, wout.String())
			}
			if rerr != nil || !strings.Contains(rout, "bad 0") {
				t.Errorf("the reader (%v):\n%s", rerr, rout)
			}
			if got := readFile(t, m.BackingPath("f")); got != strings.Repeat("A", 300000) && got != strings.Repeat("B", 123457) {
				t.Errorf("BACKING holds %d bytes starting %.1q, want a whole version", len(got), got)
			}
		})
	}
}
