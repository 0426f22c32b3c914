package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// -o auto_unmount: the mount goes when the daemon dies, as libfuse's
// option does. libfuse's way is fusermount3 -o auto_unmount, which stays
// alive after mounting to watch the daemon's socket; go-fuse waits for
// fusermount3 to exit, so with it the mount never becomes ready. realmfs
// does what fusermount3 would, with a watcher of its own: the daemon
// starts itself again as a watcher holding the read end of a pipe whose
// write end only the daemon has (close-on-exec). However the daemon ends
// (a clean unmount, SIGKILL, a crash) the pipe reads EOF; if the mount of
// the daemon's device is still at the mountpoint (a dead daemon's,
// "transport endpoint is not connected"), the watcher detaches it: as
// root by umount2(MNT_DETACH), else by fusermount3 -u -z (a user may
// unmount only what fusermount3 mounted for them). A mount another daemon
// made at the same place since has another device and is left alone.

const watchEnv = "_REALMFS_UNMOUNT_WATCH"

// startUnmountWatcher starts the watcher of the mount at mnt (by its
// device in mountinfo). Its pipe's write end stays open as long as the
// daemon lives.
func startUnmountWatcher(mnt string, logger *slog.Logger) {
	dev, err := mountDevice(mnt)
	if err != nil {
		logger.Warn("auto_unmount: no watcher", "err", err)
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		logger.Warn("auto_unmount: no watcher", "err", err)
		return
	}
	defer r.Close()
	self, err := os.Executable()
	if err != nil {
		logger.Warn("auto_unmount: no watcher", "err", err)
		return
	}
	cmd := exec.Command(self, mnt, strconv.FormatUint(dev, 10))
	cmd.Env = append(os.Environ(), watchEnv+"=1")
	cmd.ExtraFiles = []*os.File{r}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logger.Warn("auto_unmount: no watcher", "err", err)
		return
	}
	logger.Info("auto_unmount: watching", "watcher_pid", cmd.Process.Pid)
	cmd.Process.Release()
	keepOpen = append(keepOpen, w)
}

// keepOpen holds the watchers' pipes open for the daemon's life.
var keepOpen []*os.File

// isWatcher reports whether this process is an unmount watcher.
func isWatcher() bool { return os.Getenv(watchEnv) == "1" }

// runUnmountWatcher is the watcher: args are the mountpoint and the
// mount's device; fd 3 is the daemon's pipe.
func runUnmountWatcher(args []string) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	if len(args) != 2 {
		return 2
	}
	dev, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		return 2
	}
	pipe := os.NewFile(3, "daemon")
	io.Copy(io.Discard, pipe) // until the daemon is gone
	if d, err := mountDevice(args[0]); err != nil || d != dev {
		return 0 // unmounted cleanly, or someone else's mount now
	}
	if err := detachMount(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "realmfs: auto_unmount %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// detachMount lazily unmounts the dead mount at mnt.
func detachMount(mnt string) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(mnt, unix.MNT_DETACH)
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z: %w: %s", err, out)
	}
	return nil
}
