package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitUnmounted waits until dir is no realmfs mount: on the kernel's
// notice that the mount table changed (POLLPRI on /proc/self/mountinfo),
// not on a clock; bounded by stateTimeout. The file is opened and read
// with bare system calls: an *os.File would be in the Go runtime's epoll
// set, and the runtime's wake-ups poll the file too, which takes the
// notice before this poll sees it (mounts_poll reports a change once).
func waitUnmounted(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	deadline := time.Now().Add(stateTimeout)
	for {
		if fstype, ok := mountFSType(dir); !ok || fstype != "fuse.realmfs" {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s is still mounted %v after its daemon died", dir, stateTimeout)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		if _, err := unix.Pread(fd, buf, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAutoUnmount: with -o auto_unmount, a daemon killed with SIGKILL
// leaves no dead mount ("transport endpoint is not connected"): its
// watcher detaches it, the mountpoint is the plain directory again, and a
// new realmfs mounts there without -o nonempty. (-o debug, the -o form of
// -d, rides along: the daemon stays in the foreground the harness runs.)
func TestAutoUnmount(t *testing.T) {
	m := mount(t, Opts("auto_unmount", "debug"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "x\n")
	}))
	if got := readFile(t, m.Path("f")); got != "x\n" {
		t.Fatalf("f = %q through the mount", got)
	}
	// A foreground mount is seen in mountinfo before its daemon starts
	// the watcher: kill it once the watcher runs, not before.
	m.WaitLogged("msg=watching")
	_ = m.Signal(syscall.SIGKILL) // its exit is "killed", and the mount may not be gone yet
	waitUnmounted(t, m.Dir)
	if _, err := os.Stat(m.Path("f")); !os.IsNotExist(err) {
		t.Errorf("stat of f under the emptied mountpoint: %v, want ENOENT (the plain directory)", err)
	}
	m.Restart()
	if got := readFile(t, m.Path("f")); got != "x\n" {
		t.Errorf("f = %q through the mount made again", got)
	}
}

// TestKilledDaemonsConnectionAborted: once a killed daemon's threads are
// gone, its watcher aborts the FUSE connection, even while a descriptor of
// the device is still open elsewhere. A daemon killed while its notifier
// thread waits in an entry invalidation is in that state: the thread holds
// a clone of the device until a directory's lock is let go, and the
// lock's holder waits for a request no one will read (ci42's
// TestKill9DuringWrites). Here the test holds the clone itself (taken from
// the daemon with pidfd_getfd), so the state is made for certain: a
// request sent after the daemon died must fail, not wait.
func TestKilledDaemonsConnectionAborted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pidfd_getfd of the daemon's device needs root here")
	}
	// Detached: the mount is ready (its parent exits 0) once the watcher
	// runs; a foreground mount is seen in mountinfo before.
	if err := exec.Command("mountpoint", "-q", "/sys/fs/fuse/connections").Run(); err != nil {
		t.Fatalf("fusectl is not mounted on /sys/fs/fuse/connections (%v): the daemon has no connection to abort; "+
			"scripts/install-deps.sh (make deps) mounts it", err)
	}
	m := mount(t, Detached())
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.Pid))
	if err != nil {
		t.Fatal(err)
	}
	dev := -1
	for _, e := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", m.Pid, e.Name())); target == "/dev/fuse" {
			dev, _ = strconv.Atoi(e.Name())
			break
		}
	}
	if dev < 0 {
		t.Fatalf("no /dev/fuse descriptor in the daemon's table: %v", m.FDs())
	}
	pidfd, err := unix.PidfdOpen(m.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	held, err := unix.PidfdGetfd(pidfd, dev, 0)
	if err != nil {
		t.Fatalf("pidfd_getfd: %v", err)
	}
	defer unix.Close(held)
	_ = m.Signal(syscall.SIGKILL) // its exit is "killed"
	select {
	case <-m.done: // the test's clone keeps none of the daemon's threads alive
	case <-time.After(stateTimeout):
		t.Fatalf("realmfs pid %d did not exit within %v of SIGKILL: %s", m.Pid, stateTimeout, threadStates(m.Pid))
	}
	// The request is sent now, to a connection only the test holds open:
	// before the watcher aborted it, it waited for an answer forever.
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(m.Path("x"))
		done <- err
	}()
	select {
	case err := <-done:
		// ECONNABORTED if the watcher aborted it while the request waited.
		if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
			t.Errorf("stat on the killed daemon's mount: %v, want ENOTCONN or ECONNABORTED (the connection aborted)", err)
		}
	case <-time.After(stateTimeout):
		unix.Close(held) // the last descriptor: the kernel aborts the connection, and the stat returns
		t.Errorf("stat on the killed daemon's mount still waits after %v: its connection was not aborted", stateTimeout)
	}
	m.KillWithin(stateTimeout) // detaches the dead mount
	m.Restart()                // for the harness's clean unmount
}
