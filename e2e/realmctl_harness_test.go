package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// realmctl's e2e tests run against a real `podman system service` (started by
// scripts/podman-setup.sh, whose socket .ci/run exports as
// REALM_PODMAN_SOCKET) and the real realmfs that TestMain built into binDir.
// realmctl is built next to it, so it finds realmfs there.
//
//	REALM_PODMAN_SOCKET=unix:///…  the libpod API service (required; CI=true fails without it)
//	REALMCTL_BIN=/path/realmctl    use this binary instead of building ./cmd/realmctl
//
// The tests run one after another: the reaper sweeps every realm-labelled
// container of the service, so they must not overlap.

// realmctlTags are the build tags the Podman bindings need.
const realmctlTags = "remote,exclude_graphdriver_btrfs,containers_image_openpgp"

var (
	realmctlOnce sync.Once
	realmctlBin  string
	realmctlErr  error
	imageOnce    sync.Once
	imageErr     error
)

// podmanSocket returns the service's URI, or skips (fails under CI=true).
func podmanSocket(tb testing.TB) string {
	tb.Helper()
	sock := os.Getenv("REALM_PODMAN_SOCKET")
	if sock == "" {
		skipUnlessCI(tb, "REALM_PODMAN_SOCKET is not set: start a service with eval \"$(bash scripts/podman-setup.sh)\"")
	}
	if out, err := exec.Command("podman", "--url", sock, "version").CombinedOutput(); err != nil {
		tb.Fatalf("the podman service at %s does not answer: %v\n%s", sock, err, out)
	}
	return sock
}

// ctl is one realmctl state dir against one service.
type ctl struct {
	tb       testing.TB
	sock     string
	stateDir string
}

// newCtl checks the requirements, builds realmctl and the base image once,
// and returns a ctl on a fresh state dir that is fully reaped at cleanup.
func newCtl(tb testing.TB) *ctl {
	tb.Helper()
	requireFUSE(tb)
	sock := podmanSocket(tb)
	realmctlOnce.Do(func() { realmctlBin, realmctlErr = buildRealmctl() })
	if realmctlErr != nil {
		tb.Fatalf("building realmctl: %v", realmctlErr)
	}
	c := &ctl{tb: tb, sock: sock, stateDir: filepath.Join(tb.TempDir(), "state")}
	imageOnce.Do(func() {
		if out, _, code := c.run("image", "init"); code != 0 {
			imageErr = fmt.Errorf("realmctl image init exited %d: %s", code, out)
		}
	})
	if imageErr != nil {
		tb.Fatal(imageErr)
	}
	tb.Cleanup(func() {
		if _, stderr, code := c.run("reap", "--all"); code != 0 {
			tb.Errorf("cleanup: realmctl reap --all exited %d: %s", code, stderr)
		}
	})
	return c
}

func buildRealmctl() (string, error) {
	return goBuild("realmctl", "./cmd/realmctl", "REALMCTL_BIN", "-tags", realmctlTags)
}

// run runs realmctl with the state dir and socket, returning its stdout,
// stderr and exit status.
func (c *ctl) run(args ...string) (stdout, stderr string, code int) {
	c.tb.Helper()
	cmd := c.cmd(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			c.tb.Fatalf("realmctl %v: %v", args, err)
		}
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func (c *ctl) cmd(args ...string) *exec.Cmd {
	all := append([]string{"--state-dir", c.stateDir, "--podman-socket", c.sock}, args...)
	return exec.Command(realmctlBin, all...)
}

// ok runs realmctl and fails the test unless it exits 0.
func (c *ctl) ok(args ...string) string {
	c.tb.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.tb.Fatalf("realmctl %v exited %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// create starts a session on ws and returns its id.
func (c *ctl) create(ws string, args ...string) string {
	c.tb.Helper()
	out := c.ok(append([]string{"session", "create", "--workspace", ws}, args...)...)
	return strings.TrimSpace(out)
}

// execResult is session exec's JSON.
type execResult struct {
	ExitCode        int    `json:"exitCode"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	Error           *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// exec runs `session exec -o json` and returns the decoded result and the
// exit status.
func (c *ctl) exec(id string, timeout string, argv ...string) (execResult, int) {
	c.tb.Helper()
	args := []string{"-o", "json", "session", "exec", id}
	if timeout != "" {
		args = append(args, "--timeout", timeout)
	}
	out, errOut, code := c.run(append(append(args, "--"), argv...)...)
	var r execResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		c.tb.Fatalf("session exec output is not JSON (%v): %q; stderr %q", err, out, errOut)
	}
	return r, code
}

// record reads a session record of the state dir.
func (c *ctl) record(id string) map[string]any {
	c.tb.Helper()
	data, err := os.ReadFile(filepath.Join(c.stateDir, "sessions", id+".json"))
	if err != nil {
		c.tb.Fatalf("record of %s: %v", id, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		c.tb.Fatalf("record of %s: %v", id, err)
	}
	return m
}

// records lists the record files of the state dir.
func (c *ctl) records() []string {
	names, _ := filepath.Glob(filepath.Join(c.stateDir, "sessions", "*.json"))
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// podman runs the podman CLI against the service.
func (c *ctl) podman(args ...string) string {
	c.tb.Helper()
	out, err := exec.Command("podman", append([]string{"--url", c.sock}, args...)...).CombinedOutput()
	if err != nil {
		c.tb.Fatalf("podman %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// containers lists container ids (all states) matching a podman filter.
func (c *ctl) containers(filter ...string) []string {
	args := []string{"ps", "-a", "-q", "--no-trunc"}
	for _, f := range filter {
		args = append(args, "--filter", f)
	}
	out := c.podman(args...)
	if out == "" {
		return nil
	}
	return strings.Fields(out)
}

// realmfsMounts lists the realmfs mountpoints under the state dir.
func (c *ctl) realmfsMounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		c.tb.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 || !strings.HasPrefix(post, "fuse.realmfs ") {
			continue
		}
		if mp := unescapeMountinfo(f[4]); strings.HasPrefix(mp, c.stateDir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// workspace makes a workspace dir owned by uid 1000, as an agent's would be.
func workspace(tb testing.TB) string {
	tb.Helper()
	ws := filepath.Join(tb.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(ws, 1000, 1000); err != nil {
		tb.Fatal(err)
	}
	// The workspace's parents must be searchable by the realmfs daemon only
	// (it runs as root); nothing else needs them.
	return ws
}

// realmfsPid finds the realmfs daemon serving mountpoint mnt.
func realmfsPid(tb testing.TB, mnt string) int {
	tb.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := bytes.Split(cmdline, []byte{0})
		if len(args) == 0 || filepath.Base(string(args[0])) != "realmfs" {
			continue
		}
		for _, a := range args {
			if string(a) == mnt {
				return pid
			}
		}
	}
	tb.Fatalf("no realmfs process serves %s", mnt)
	return 0
}

// waitGone waits until every thread of process pid has exited, so that the
// descriptors it held (a realmfs's /dev/fuse) are closed. A pidfd polls
// readable only then (pidfd_open(2): the thread group has exited); the
// leader's zombie state in /proc comes earlier, while its other threads
// may still be serving requests.
func waitGone(tb testing.TB, pid int) {
	tb.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		tb.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(stateTimeout/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			tb.Fatalf("poll of pid %d: %v", pid, err)
		}
		if n == 0 {
			tb.Fatalf("pid %d did not exit", pid)
		}
		break
	}
	// A zombie whose parent is this process is reaped; any other is its
	// parent's to reap.
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
}

// wantDeadMount wants mountpoint mnt, whose daemon has exited (waitGone),
// to answer a directory read as a dead FUSE connection does: ENOTCONN, or
// ECONNABORTED for a request that was in flight as it went down. A read
// goes to the daemon; stat may be answered from cached attributes.
func wantDeadMount(tb testing.TB, mnt string) {
	tb.Helper()
	if _, err := os.ReadDir(mnt); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		tb.Fatalf("reading the dead mount: %v, want ENOTCONN or ECONNABORTED", err)
	}
}
