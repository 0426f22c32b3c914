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
	"sync"
	"syscall"
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

var (
	realmtestOnce sync.Once
	realmtestPath string
	realmtestErr  error
)

// realmtestBinary is realmfs built with -tags realmtest (REALMFS_FAIL_AT
// injects commit failures), built once per run.
func realmtestBinary(tb testing.TB) string {
	tb.Helper()
	realmtestOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			realmtestErr = err
			return
		}
		out := filepath.Join(binDir, "realmfs-realmtest")
		args := []string{"build", "-tags", "realmtest", "-o", out, "./cmd/realmfs"}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			realmtestErr = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, msg)
			return
		}
		realmtestPath = out
	})
	if realmtestErr != nil {
		tb.Fatalf("building realmfs with -tags realmtest: %v", realmtestErr)
	}
	return realmtestPath
}

// mountBinary is mount() for another realmfs binary, with env added to the
// daemon's environment. Foreground only; the Mount's Unmount, Kill and
// cleanup work as for mount() (Restart would start realmfsBin: do not use).
func mountBinary(tb testing.TB, bin string, env []string, options ...MountOption) *Mount {
	tb.Helper()
	m := newMount(tb, options)
	cfg := m.cfg
	if cfg.detach || cfg.helper || cfg.cred != nil {
		tb.Fatal("mountBinary: foreground mounts as root only")
	}
	if cfg.prepare != nil {
		cfg.prepare(m)
	}
	tb.Cleanup(m.cleanup)

	logf, err := os.OpenFile(m.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s %s %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(env, " "), bin, strings.Join(m.args(), " "))
	cmd := exec.Command(bin, m.args()...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = m.Root
	m.done = make(chan struct{})
	if err := cmd.Start(); err != nil {
		close(m.done)
		m.stopped = true
		tb.Fatal(err)
	}
	m.Pid = cmd.Process.Pid
	go func() {
		m.exitErr = cmd.Wait()
		close(m.done)
	}()
	deadline := time.Now().Add(mountTimeout)
	for {
		if fstype, ok := mountFSType(m.Dir); ok {
			if fstype != "fuse.realmfs" {
				tb.Fatalf("%s mounted with type %q, want fuse.realmfs", m.Dir, fstype)
			}
			return m
		}
		select {
		case <-m.done:
			tb.Fatalf("%s exited before mounting: %v\n%s", bin, m.exitErr, m.logTail())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not mounted within %v\n%s", m.Dir, mountTimeout, m.logTail())
		}
		time.Sleep(20 * time.Millisecond)
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

// fuseConn is the FUSE connection id of the mount at dir (the minor number
// of its device), for /sys/fs/fuse/connections/N.
func fuseConn(tb testing.TB, dir string) uint32 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		tb.Fatalf("stat %s: %v", dir, err)
	}
	return unix.Minor(st.Dev)
}

// threadStates describes the daemon's threads that are still alive: their
// state and kernel wait channel.
func threadStates(pid int) string {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, t := range tasks {
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, t.Name()))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		state := ""
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				state = strings.TrimSpace(v)
			}
		}
		out = append(out, fmt.Sprintf("tid %s %s wchan %s", t.Name(), state, wchan))
	}
	return strings.Join(out, "; ")
}

// killHard is Mount.Kill that cannot hang: SIGKILL, and if the daemon has
// not exited within grace (a thread stuck in the kernel keeps /dev/fuse
// open, so the connection is never aborted and every process on the mount
// waits forever), it aborts the FUSE connection through sysfs. It returns
// "" or a description of the stuck daemon. The dead mount is detached.
func killHard(m *Mount, conn uint32, grace time.Duration) (stuck string) {
	m.tb.Helper()
	m.stopped = true
	if m.Pid > 0 {
		_ = syscall.Kill(m.Pid, syscall.SIGKILL)
	}
	select {
	case <-m.done:
	case <-time.After(grace):
		stuck = fmt.Sprintf("realmfs pid %d did not exit within %v of SIGKILL: %s", m.Pid, grace, threadStates(m.Pid))
		abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", conn)
		if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
			m.tb.Errorf("%s: %v", abort, err)
		}
		<-m.done
	}
	if m.Mounted() {
		if msg, err := exec.Command("fusermount3", "-u", "-z", m.Dir).CombinedOutput(); err != nil {
			if msg2, err2 := exec.Command("umount", "-l", m.Dir).CombinedOutput(); err2 != nil {
				m.tb.Fatalf("detaching killed mount: %v %s; %v %s", err, msg, err2, msg2)
			}
		}
	}
	return stuck
}
