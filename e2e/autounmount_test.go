package e2e

import (
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitUnmounted waits until dir is no realmfs mount: on the kernel's
// notice that the mount table changed (POLLPRI on /proc/self/mountinfo),
// not on a clock; bounded by stateTimeout.
func waitUnmounted(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deadline := time.Now().Add(stateTimeout)
	for {
		// Read first: poll reports changes since the file was last read.
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Read(make([]byte, 1<<16)); err != nil {
			t.Fatal(err)
		}
		if fstype, ok := mountFSType(dir); !ok || fstype != "fuse.realmfs" {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s is still mounted %v after its daemon died", dir, stateTimeout)
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())); err != nil && err != unix.EINTR {
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
