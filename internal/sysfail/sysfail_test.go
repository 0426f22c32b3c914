package sysfail

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// onThread runs fn on a fresh OS thread that ends with it, so a filter fn
// installs dies with the thread.
func onThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fn()
	}()
	<-done
}

func TestRulesFailOnlyWhatTheyName(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	onThread(func() {
		err := Install([]Rule{
			{Nr: unix.SYS_GETPPID, Arg: -1, Errno: syscall.ENOSYS},
			{Nr: unix.SYS_OPENAT, Arg: 2, Set: unix.O_NOFOLLOW, Clear: unix.O_PATH, Errno: syscall.ENOSYS},
		}, false)
		if err != nil {
			t.Error(err)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0); e != syscall.ENOSYS {
			t.Errorf("getppid: %v, want ENOSYS", e)
		}
		if _, err := unix.Openat(unix.AT_FDCWD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != syscall.ENOSYS {
			t.Errorf("openat with O_NOFOLLOW: %v, want ENOSYS", err)
		}
		for _, flags := range []int{unix.O_RDONLY, unix.O_PATH | unix.O_NOFOLLOW} {
			fd, err := unix.Openat(unix.AT_FDCWD, name, flags|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Errorf("openat with flags %#x: %v, want it let through", flags, err)
				continue
			}
			unix.Close(fd)
		}
	})
	// The filtered thread is gone; no other thread ever had the filter.
	if _, _, e := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0); e != 0 {
		t.Errorf("getppid after the filtered thread ended: %v", e)
	}
}
