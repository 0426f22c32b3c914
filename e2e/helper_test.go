package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	switch name {
	case "probe":
		return helperProbe(args)
	case "lock":
		return helperLock(args)
	case "swap":
		return helperSwap(args)
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

// lockHolder is a helper process holding a lock on a file until released.
type lockHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// holdLock starts a helper that opens path O_RDWR, takes an exclusive lock
// of kind ("flock", "posix" or "ofd") without blocking, and holds it until
// Release. It fails the test if the helper could not take the lock.
func holdLock(tb testing.TB, kind, path string) *lockHolder {
	tb.Helper()
	cmd := helperCmd(context.Background(), nil, "lock", kind, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	h := &lockHolder{cmd: cmd, stdin: stdin}
	tb.Cleanup(func() { h.Release(tb) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		tb.Fatalf("lock helper (%s %s): %q %v", kind, path, line, err)
	}
	return h
}

// Release ends the helper, which drops its lock by exiting.
func (h *lockHolder) Release(tb testing.TB) {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	if err := h.cmd.Wait(); err != nil {
		tb.Errorf("lock helper: %v", err)
	}
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
