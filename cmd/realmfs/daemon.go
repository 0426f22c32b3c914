package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Detaching: Go cannot fork, so the parent re-executes itself with an
// environment marker and a pipe on fd 3. The child mounts and writes one
// line to the pipe: "ok", or the reason it failed. The parent exits 0 only
// on "ok", so `realmfs B M && ls M` never races the mount.
//
// Until then the child's stderr is a second pipe the parent reads, so what
// went wrong reaches the caller verbatim: fusermount3's own message (it
// inherits stderr) says why the kernel refused, which "fusermount exited
// with code 256" does not. Once mounted, the child points its stderr at
// /dev/null before saying "ok", so nothing it writes later meets a pipe
// nobody reads.
const daemonEnv = "_REALMFS_DAEMON"

func isDaemonChild() bool { return os.Getenv(daemonEnv) == "1" }

func detach(stderr io.Writer) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return 1
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return 1
	}
	defer devnull.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "realmfs: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, errW
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "realmfs: start daemon: %v\n", err)
		return 1
	}
	w.Close()
	errW.Close()
	// Collect the child's stderr while it mounts; the pipe must be read
	// or a chatty child would block on it.
	collected := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errR, 64<<10))
		collected <- b
		io.Copy(io.Discard, errR)
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if err == nil && line == "ok" {
		errR.Close()
		cmd.Process.Release()
		return 0
	}
	status := ""
	if st, werr := cmd.Process.Wait(); werr == nil {
		status = st.String()
	}
	// The child has exited: its stderr is complete unless a process it
	// started still holds the pipe, which is not worth waiting long for.
	var said []byte
	select {
	case said = <-collected:
	case <-time.After(2 * time.Second):
	}
	if len(said) > 0 {
		stderr.Write(said)
		if said[len(said)-1] != '\n' {
			fmt.Fprintln(stderr)
		}
	}
	if line == "" {
		line = fmt.Sprintf("daemon exited before the mount was ready (%s)", status)
	}
	if !strings.Contains(string(said), line) {
		fmt.Fprintf(stderr, "realmfs: %s\n", line)
	}
	return 1
}

// quietStderr points the daemon's stderr at /dev/null: the parent has
// stopped reading the pipe it was.
func quietStderr() {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer devnull.Close()
	unix.Dup2(int(devnull.Fd()), 2)
}

// notifyParent tells a waiting parent how the mount went: "" is success.
// Outside daemon mode it does nothing.
func notifyParent(failure string) {
	if !isDaemonChild() {
		return
	}
	pipe := os.NewFile(3, "notify")
	if pipe == nil {
		return
	}
	msg := "ok"
	if failure != "" {
		msg = failure
	} else {
		quietStderr()
	}
	fmt.Fprintln(pipe, msg)
	pipe.Close()
}
