package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv names the helper mode when the test binary runs as a helper
// process (another uid, another lock owner, the adversary).
const helperEnv = "REALM_E2E_HELPER"

// runHelper is the main function of a helper process.
func runHelper(name string, args []string) int {
	// Every helper does its file operations from one OS thread: with
	// lockowner=pid the kernel reports the calling thread's id.
	runtime.LockOSThread()
	switch name {
	case "probe":
		return helperProbe(args)
	case "lock":
		return helperLock(args)
	case "swap":
		return helperSwap(args)
	case "holdwrite":
		return helperHoldWrite(args)
	case "bigwrite":
		return helperBigWrite(args)
	case "twothreads":
		return helperTwoThreads(args)
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

// helperCmd is a command running this test binary's helper mode, as cred when
// cred is not nil.
func helperCmd(ctx context.Context, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, selfBin, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// asNobody is the credential of uid/gid 65534 with no supplementary groups.
var asNobody = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}

// probe runs filesystem operations in a helper process as cred (nil: as
// root) and returns one result per op: "ok", "ok PAYLOAD" or "err ENAME".
// An op is "verb:path" or "verb:path:arg":
//
//	read:P            payload is the content
//	sum:P             payload is "SIZE SHA256" of the content
//	write:P:DATA      O_WRONLY|O_CREAT|O_TRUNC, 0644
//	append:P:DATA     O_WRONLY|O_APPEND
//	create:P          O_CREAT|O_EXCL, 0644
//	mkdir:P           0755
//	mkfifo:P          0644
//	stat:P / lstat:P  payload "uid gid mode(octal)"
//	unlink:P, rmdir:P
//	readdir:P         payload: names joined by ","
//	readlink:P
//	symlink:P:TARGET
//	rename:P:NEWPATH
//	chmod:P:MODE      octal
func probe(tb testing.TB, cred *syscall.Credential, ops ...string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := helperCmd(ctx, cred, "probe", ops...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("probe helper %v: %v\n%s", ops, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(ops) {
		tb.Fatalf("probe helper: %d results for %d ops: %q", len(lines), len(ops), out)
	}
	return lines
}

func helperProbe(ops []string) int {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, op := range ops {
		parts := strings.SplitN(op, ":", 3)
		verb, path, arg := parts[0], "", ""
		if len(parts) > 1 {
			path = parts[1]
		}
		if len(parts) > 2 {
			arg = parts[2]
		}
		payload, err := probeOp(verb, path, arg)
		switch {
		case err != nil && errnoOf(err) != 0:
			fmt.Fprintf(w, "err %s\n", errnoName(errnoOf(err)))
		case err != nil:
			fmt.Fprintf(w, "err %q\n", err.Error())
		case payload != "":
			fmt.Fprintf(w, "ok %s\n", strings.ReplaceAll(payload, "\n", `\n`))
		default:
			fmt.Fprintln(w, "ok")
		}
	}
	return 0
}

func probeOp(verb, path, arg string) (string, error) {
	switch verb {
	case "read":
		b, err := os.ReadFile(path)
		return string(b), err
	case "sum":
		b, err := os.ReadFile(path)
		return sum(b), err
	case "write":
		return "", os.WriteFile(path, []byte(arg), 0o644)
	case "append":
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return "", err
		}
		if _, err := f.WriteString(arg); err != nil {
			f.Close()
			return "", err
		}
		return "", f.Close()
	case "create":
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return "", err
		}
		return "", unix.Close(fd)
	case "mkdir":
		return "", unix.Mkdir(path, 0o755)
	case "mkfifo":
		return "", unix.Mkfifo(path, 0o644)
	case "stat", "lstat":
		var st unix.Stat_t
		var err error
		if verb == "stat" {
			err = unix.Stat(path, &st)
		} else {
			err = unix.Lstat(path, &st)
		}
		return fmt.Sprintf("%d %d %o", st.Uid, st.Gid, st.Mode), err
	case "unlink":
		return "", unix.Unlink(path)
	case "rmdir":
		return "", unix.Rmdir(path)
	case "readdir":
		entries, err := os.ReadDir(path)
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		return strings.Join(names, ","), err
	case "readlink":
		return os.Readlink(path)
	case "symlink":
		return "", unix.Symlink(arg, path)
	case "rename":
		return "", unix.Rename(path, arg)
	case "chmod":
		mode, err := strconv.ParseUint(arg, 8, 32)
		if err != nil {
			return "", err
		}
		return "", unix.Chmod(path, uint32(mode))
	}
	return "", fmt.Errorf("unknown probe op %q", verb)
}

// sum is "SIZE SHA256HEX" of b.
func sum(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%d %x", len(b), h)
}

// proc is a process a test started: its stdin (the helpers of this binary
// finish when it closes) and its stdout, read line by line.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // nil once closed, or when not piped
	stdout *bufio.Reader  // nil when not piped
	waited bool
	err    error // of Wait
}

// startProc is the one way the tests start a process they keep running:
// the helper modes of this binary (helperCmd), python readers, shell loops.
// With pipes, its stdin and stdout are pipes to the test and its stderr,
// unless cmd has one, is the test binary's; without, they are as cmd has
// them. A cleanup kills what is still running (the whole process group
// when cmd starts one, Setpgid) and waits for it.
func startProc(tb testing.TB, cmd *exec.Cmd, pipes bool) *proc {
	tb.Helper()
	p := &proc{cmd: cmd}
	if pipes {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if cmd.Stderr == nil {
			cmd.Stderr = os.Stderr
		}
		p.stdin, p.stdout = stdin, bufio.NewReader(stdout)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.kill)
	return p
}

// line reads the next line of the process's stdout, trimmed.
func (p *proc) line(tb testing.TB, timeout time.Duration, what string) string {
	tb.Helper()
	return readLine(tb, p.stdout, timeout, what)
}

// closeStdin tells a helper to finish. It is safe to call more than once.
func (p *proc) closeStdin() {
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

// wait waits for the process once and returns its exit.
func (p *proc) wait() error {
	if !p.waited {
		p.waited = true
		p.err = p.cmd.Wait()
	}
	return p.err
}

// kill ends the process (its group, if it has one) unless it has been
// waited for, and waits.
func (p *proc) kill() {
	if p.waited {
		return
	}
	p.closeStdin()
	if a := p.cmd.SysProcAttr; a != nil && a.Setpgid {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		p.cmd.Process.Kill()
	}
	p.wait()
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

// lockHolder is a helper process holding a lock on a file until released.
type lockHolder struct{ *proc }

// holdLock starts a helper that opens path O_RDWR, takes an exclusive lock
// of kind ("flock", "posix" or "ofd") without blocking, and holds it until
// Release. It fails the test if the helper could not take the lock.
func holdLock(tb testing.TB, kind, path string) *lockHolder {
	tb.Helper()
	h := &lockHolder{startProc(tb, helperCmd(context.Background(), nil, "lock", kind, path), true)}
	tb.Cleanup(func() { h.Release(tb) })
	if line := h.line(tb, 20*time.Second, "lock helper"); line != "locked" {
		tb.Fatalf("lock helper (%s %s): %q", kind, path, line)
	}
	return h
}

// Release ends the helper, which drops its lock by exiting.
func (h *lockHolder) Release(tb testing.TB) {
	if h.stdin == nil {
		return
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		tb.Errorf("lock helper: %v", err)
	}
}

// holdWrite starts a helper process that opens path for writing, writes
// data, and holds the descriptor until finish is called; finish returns the
// helper's "close ..." line.
func holdWrite(t *testing.T, path, data string) (finish func() string) {
	t.Helper()
	p := startProc(t, helperCmd(context.Background(), nil, "holdwrite", path, data), true)
	done := false
	finish = func() string {
		if done {
			return ""
		}
		done = true
		p.closeStdin()
		line := p.line(t, 20*time.Second, "holdwrite close")
		p.wait()
		return line
	}
	t.Cleanup(func() { finish() })
	if line := p.line(t, 20*time.Second, "holdwrite ready"); line != "ready" {
		t.Fatalf("holdwrite helper: %q, want ready", line)
	}
	return finish
}

// startReader starts a python process that opens path read-only and, for
// each command, answers: "read" prints the whole file from offset 0 through
// the one descriptor, "quit" exits.
func startReader(t *testing.T, path string) func(cmd string) string {
	t.Helper()
	p := startProc(t, exec.Command("python3", "-u", "-c", `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for line in sys.stdin:
    if line.strip() == "quit":
        break
    try:
        data = os.pread(fd, 1 << 20, 0).decode()
        sys.stdout.write(str(len(data)) + "\n" + data)
    except OSError as e:
        sys.stdout.write("0\nERROR " + e.strerror)
    sys.stdout.flush()`, path), true)
	return func(c string) string {
		t.Helper()
		fmt.Fprintln(p.stdin, c)
		if c == "quit" {
			p.closeStdin()
			p.wait()
			return ""
		}
		n, err := strconv.Atoi(p.line(t, 20*time.Second, "reader length"))
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(p.stdout, buf); err != nil {
			t.Fatalf("reader: %v", err)
		}
		return string(buf)
	}
}

// startLoop runs script with sh in dir, env added, in its own process
// group, until the returned stop kills the group.
func startLoop(t *testing.T, dir string, env []string, script string) (stop func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return startProc(t, cmd, false).kill
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

func helperLock(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "lock KIND PATH")
		return 2
	}
	kind, path := args[0], args[1]
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Printf("err %s\n", errnoName(errnoOf(err)))
		return 1
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	switch kind {
	case "flock":
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	case "posix":
		err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
	case "ofd":
		err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	default:
		err = fmt.Errorf("unknown lock kind %q", kind)
	}
	if err != nil {
		fmt.Printf("err %v\n", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // hold until the test closes stdin
	return 0
}

// helperSwap is the adversary: it exchanges pairs of names with
// renameat2(RENAME_EXCHANGE) in a tight loop until its stdin is closed, then
// restores the original arrangement and prints the number of exchanges.
// Args: PAUSE DIR:A:B [DIR:A:B ...]. Every directory is opened once, before
// the first exchange, and held by fd (so a directory that is itself swapped
// is still reached). Each pair is exchanged twice in a row (swap, restore);
// after each round of all pairs the swapper sleeps PAUSE (a Go duration,
// e.g. 20us; 0 for none) so that on a small machine the mount's readers and
// daemon still get CPU: the exchange rate stays in the hundred thousands per
// second.
func helperSwap(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "swap PAUSE DIR:A:B [DIR:A:B ...]")
		return 2
	}
	pause, err := time.ParseDuration(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "swap:", err)
		return 2
	}
	type pair struct {
		dirfd int
		a, b  string
	}
	var pairs []pair
	dirs := map[string]int{}
	for _, arg := range args[1:] {
		parts := strings.Split(arg, ":")
		if len(parts) != 3 {
			fmt.Fprintln(os.Stderr, "swap: want DIR:A:B, got", arg)
			return 2
		}
		fd, ok := dirs[parts[0]]
		if !ok {
			fd, err = unix.Open(parts[0], unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "swap:", err)
				return 1
			}
			dirs[parts[0]] = fd
		}
		pairs = append(pairs, pair{fd, parts[1], parts[2]})
	}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	fmt.Println("swapping")
	var n int64
	for !stop.Load() {
		for _, p := range pairs {
			for range 2 {
				if err := unix.Renameat2(p.dirfd, p.a, p.dirfd, p.b, unix.RENAME_EXCHANGE); err != nil {
					fmt.Fprintln(os.Stderr, "swap: renameat2:", p.a, p.b, err)
					return 1
				}
				n++
			}
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	fmt.Println(n)
	return 0
}
