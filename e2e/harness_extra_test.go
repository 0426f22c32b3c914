package e2e

// Harness additions for the credential (issue 3) and atomic-write (issue 4)
// tests: a realmfs built with -tags realmtest (failure injection), mounts of
// another binary with extra environment for the daemon, listings of BACKING
// that include realm's hidden names, and extra helper modes of this test
// binary (dispatched from init, before TestMain, under their own env var so
// that helper_test.go stays untouched).

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// extraHelperEnv names the helper mode of the helpers below.
const extraHelperEnv = "REALM_E2E_XHELPER"

func init() {
	if name := os.Getenv(extraHelperEnv); name != "" {
		os.Exit(runExtraHelper(name, os.Args[1:]))
	}
}

func runExtraHelper(name string, args []string) int {
	// Every helper does its file operations from one OS thread: with
	// lockowner=pid the kernel reports the calling thread's id.
	runtime.LockOSThread()
	switch name {
	case "holdwrite":
		return helperHoldWrite(args)
	case "bigwrite":
		return helperBigWrite(args)
	case "twothreads":
		return helperTwoThreads(args)
	}
	fmt.Fprintf(os.Stderr, "unknown extra helper %q\n", name)
	return 2
}

// extraHelperCmd runs this test binary in one of the helper modes above.
func extraHelperCmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, selfBin, args...)
	cmd.Env = append(os.Environ(), extraHelperEnv+"="+name)
	return cmd
}

// errWord is "ok" or "err ENAME" for err.
func errWord(err error) string {
	if err == nil {
		return "ok"
	}
	if e := errnoOf(err); e != 0 {
		return "err " + errnoName(e)
	}
	return fmt.Sprintf("err %q", err.Error())
}

// helperHoldWrite: PATH DATA. Opens PATH O_WRONLY|O_TRUNC, writes DATA,
// prints "ready" (or "open err E"), waits for stdin to close, closes the
// file and prints "close ok" or "close err E".
func helperHoldWrite(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "holdwrite PATH DATA")
		return 2
	}
	fd, err := unix.Open(args[0], unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open " + errWord(err))
		return 1
	}
	if _, err := unix.Write(fd, []byte(args[1])); err != nil {
		fmt.Println("write " + errWord(err))
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Println("close " + errWord(unix.Close(fd)))
	return 0
}

// helperBigWrite: PATH SIZE CHUNK SEED. Opens PATH O_WRONLY|O_TRUNC, prints
// "open", writes SIZE bytes of pattern(SEED) in CHUNK-sized writes, prints
// "close ok" or "... err E" and exits.
func helperBigWrite(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "bigwrite PATH SIZE CHUNK SEED")
		return 2
	}
	size, _ := strconv.ParseInt(args[1], 10, 64)
	chunk, _ := strconv.Atoi(args[2])
	seed, _ := strconv.Atoi(args[3])
	fd, err := unix.Open(args[0], unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open " + errWord(err))
		return 1
	}
	fmt.Println("open")
	buf := make([]byte, chunk)
	for off := int64(0); off < size; off += int64(chunk) {
		n := min(int64(chunk), size-off)
		fillPattern(buf[:n], byte(seed), off)
		if _, err := unix.Write(fd, buf[:n]); err != nil {
			fmt.Printf("write at %d %s\n", off, errWord(err))
			return 1
		}
	}
	fmt.Println("close " + errWord(unix.Close(fd)))
	return 0
}

// helperTwoThreads: PATH. Opens PATH for writing from one OS thread, then
// again from another OS thread of the same process, and prints one line per
// open and per close.
func helperTwoThreads(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "twothreads PATH")
		return 2
	}
	fd1, err := unix.Open(args[0], unix.O_WRONLY|unix.O_CLOEXEC, 0)
	fmt.Printf("open1 tid %d %s\n", unix.Gettid(), errWord(err))
	res := make(chan string)
	go func() {
		runtime.LockOSThread() // a thread of its own, never the first one
		fd2, err := unix.Open(args[0], unix.O_WRONLY|unix.O_CLOEXEC, 0)
		line := fmt.Sprintf("open2 tid %d %s", unix.Gettid(), errWord(err))
		if err == nil {
			unix.Close(fd2)
		}
		res <- line
	}()
	fmt.Println(<-res)
	if fd1 >= 0 && err == nil {
		unix.Close(fd1)
	}
	return 0
}

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

// backingNames lists every name beneath root (not through a mount),
// hidden ones included, as slash-separated relative paths.
func backingNames(tb testing.TB, root string) []string {
	tb.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("listing %s: %v", root, err)
	}
	return names
}

// tempResidue lists the .realm-tmp-* names beneath root.
func tempResidue(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	for _, n := range backingNames(tb, root) {
		if strings.HasPrefix(filepath.Base(n), ".realm-tmp-") {
			out = append(out, n)
		}
	}
	return out
}

// assertNoTemp fails if a .realm-tmp-* name is left beneath root.
func assertNoTemp(tb testing.TB, root, when string) {
	tb.Helper()
	if left := tempResidue(tb, root); len(left) > 0 {
		tb.Errorf("%s: temp files left in BACKING: %v", when, left)
	}
}

// fileState is what a test compares to prove a file was not touched.
type fileState struct {
	data  string
	ino   uint64
	mtime unix.Timespec
	size  int64
}

func stateOf(tb testing.TB, path string) fileState {
	tb.Helper()
	st := lstat(tb, path)
	return fileState{data: readFile(tb, path), ino: st.Ino, mtime: st.Mtim, size: st.Size}
}

// sameState reports how now differs from was ("" if it does not).
func (was fileState) diff(now fileState) string {
	var d []string
	if now.data != was.data {
		d = append(d, fmt.Sprintf("content %q, was %q", clip(now.data), clip(was.data)))
	}
	if now.ino != was.ino {
		d = append(d, fmt.Sprintf("inode %d, was %d", now.ino, was.ino))
	}
	if now.mtime != was.mtime {
		d = append(d, fmt.Sprintf("mtime %v, was %v", now.mtime, was.mtime))
	}
	return strings.Join(d, "; ")
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// auditCount counts the audit entries that satisfy match.
func auditCount(m *Mount, match func(auditEntry) bool) int {
	n := 0
	for _, e := range m.Audit() {
		if match(e) {
			n++
		}
	}
	return n
}

// readLine reads one line from r with a timeout.
func readLine(tb testing.TB, r *bufio.Reader, timeout time.Duration, what string) string {
	tb.Helper()
	ch := make(chan string, 1)
	go func() {
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			line = "EOF: " + err.Error()
		}
		ch <- strings.TrimSpace(line)
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(timeout):
		tb.Fatalf("%s: no line within %v", what, timeout)
		return ""
	}
}

// lockedThread runs fn on a goroutine locked to its own OS thread (one
// kernel thread id, hence one owner under lockowner=pid) and waits for it.
func lockedThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fn()
	}()
	<-done
}
