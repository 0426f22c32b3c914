package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Detaching: Go cannot fork, so the parent re-executes itself with an
// environment marker and a pipe on fd 3. The child mounts and writes one
// line to the pipe: "ok", or the reason it failed. The parent exits 0 only
// on "ok", so `realmfs B M && ls M` never races the mount.
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
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "realmfs: start daemon: %v\n", err)
		return 1
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if err == nil && line == "ok" {
		cmd.Process.Release()
		return 0
	}
	if line == "" {
		line = "daemon exited before the mount was ready"
		if st, werr := cmd.Process.Wait(); werr == nil {
			line = fmt.Sprintf("%s (%s)", line, st)
		}
	}
	fmt.Fprintf(stderr, "realmfs: %s\n", line)
	return 1
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
	}
	fmt.Fprintln(pipe, msg)
	pipe.Close()
}
