// Package mountwatch is realmfs's watcher: a process of its own that
// outlives the daemon, aborts its FUSE connection, and with -o
// auto_unmount detaches its mount.
package mountwatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon's watcher: a process of its own (the daemon started again,
// in a session of its own) holding the read end of a pipe whose write end
// only the daemon's threads have (close-on-exec; the notifier's thread,
// whose descriptor table is private, closed its copy: internal/devthread).
// However the daemon ends (a clean unmount, SIGKILL, a crash) the pipe
// reads EOF, and the watcher does what the kernel cannot:
//
//   - It aborts the daemon's FUSE connection, through the fusectl file the
//     daemon opened for it once mounted (/sys/fs/fuse/connections/N/abort:
//     that connection's, never a later mount's of the same number; once
//     the connection is gone a write to it fails, ENOTCONN). A killed
//     daemon's thread asleep in an entry invalidation holds a clone of the
//     device open until a directory's lock is let go; the lock's holder
//     waits for a request the daemon never read, and the process could not
//     finish dying, nor the mount answer, until the connection was
//     aborted by hand (ci42's TestKill9DuringWrites). After a clean
//     unmount the connection is gone already: nothing to do.
//   - With -o auto_unmount, the mount goes when the daemon dies, as
//     libfuse's option does. libfuse's way is fusermount3 -o auto_unmount,
//     which stays alive after mounting to watch the daemon's socket;
//     go-fuse waits for fusermount3 to exit, so with it the mount never
//     becomes ready. If the mount of the daemon's device is still at the
//     mountpoint (a dead daemon's, "transport endpoint is not connected"),
//     the watcher detaches it: as root by umount2(MNT_DETACH), else by
//     fusermount3 -u -z (a user may unmount only what fusermount3 mounted
//     for them). A mount another daemon made at the same place since has
//     another device and is left alone.

const watchEnv = "_REALMFS_UNMOUNT_WATCH"

// connAbortPath is the fusectl file that aborts the FUSE connection of
// the mount with device dev (fusectl names a connection by the device
// number of its mount, major 0).
func connAbortPath(dev uint64) string {
	return "/sys/fs/fuse/connections/" + strconv.FormatUint(uint64(unix.Minor(dev)), 10) + "/abort"
}

// Start starts the watcher of the mount at mnt of device dev (from
// mountinfo), detaching it at the daemon's end if autoUnmount. It runs
// this executable again, which must call Run first thing when IsWatcher.
// Its pipe's write end stays open as long as the daemon lives. Without a
// watcher (fusectl not mounted and no auto_unmount, or a failure, logged)
// the daemon serves as before.
func Start(mnt string, dev uint64, autoUnmount bool, logger *slog.Logger) {
	abort, aerr := os.OpenFile(connAbortPath(dev), os.O_WRONLY|syscall.O_CLOEXEC, 0)
	if aerr != nil {
		const msg = "no watcher to abort the FUSE connection if the daemon is killed"
		if os.Geteuid() == 0 && errors.Is(aerr, fs.ErrNotExist) {
			// Root could abort it, but fusectl is not mounted (systemd
			// mounts it at boot; a machine booted without it has none).
			logger.Warn(msg, "err", aerr, "fix", "mount -t fusectl fusectl /sys/fs/fuse/connections")
		} else {
			logger.Info(msg, "err", aerr)
		}
		if !autoUnmount {
			return
		}
	} else {
		defer abort.Close()
	}
	r, w, err := os.Pipe()
	if err != nil {
		logger.Warn("no watcher", "err", err)
		return
	}
	defer r.Close()
	self, err := os.Executable()
	if err != nil {
		logger.Warn("no watcher", "err", err)
		return
	}
	cmd := exec.Command(self, mnt, strconv.FormatUint(dev, 10), strconv.FormatBool(autoUnmount), strconv.FormatBool(abort != nil))
	cmd.Env = append(os.Environ(), watchEnv+"=1")
	cmd.ExtraFiles = []*os.File{r}
	if abort != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, abort)
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logger.Warn("no watcher", "err", err)
		return
	}
	logger.Info("watching", "watcher_pid", cmd.Process.Pid, "aborts_connection", abort != nil, "auto_unmount", autoUnmount)
	cmd.Process.Release()
	keepOpen = append(keepOpen, w)
}

// keepOpen holds the watchers' pipes open for the daemon's life.
var keepOpen []*os.File

// IsWatcher reports whether this process is a watcher Start started.
func IsWatcher() bool { return os.Getenv(watchEnv) == "1" }

// Run is the watcher: args are the mountpoint, the mount's device,
// whether to detach it and whether fd 4 is the connection's abort file;
// fd 3 is the daemon's pipe. deviceAt reads the device of the mount at a
// directory (mountinfo), to detach only the daemon's. It returns the
// process's exit status.
func Run(args []string, deviceAt func(dir string) (uint64, error)) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	if len(args) != 4 {
		return 2
	}
	dev, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		return 2
	}
	autoUnmount, err1 := strconv.ParseBool(args[2])
	hasAbort, err2 := strconv.ParseBool(args[3])
	if err1 != nil || err2 != nil {
		return 2
	}
	var abort *os.File
	if hasAbort {
		abort = os.NewFile(4, "abort")
	}
	pipe := os.NewFile(3, "daemon")
	io.Copy(io.Discard, pipe) // until the daemon is gone
	status := 0
	if err := abortConn(abort); err != nil {
		fmt.Fprintf(os.Stderr, "realmfs: aborting the FUSE connection of %s: %v\n", args[0], err)
		status = 1
	}
	if !autoUnmount {
		return status
	}
	if d, err := deviceAt(args[0]); err != nil || d != dev {
		return status // unmounted cleanly, or someone else's mount now
	}
	if err := detachMount(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "realmfs: auto_unmount %s: %v\n", args[0], err)
		return 1
	}
	return status
}

// abortConn aborts the dead daemon's connection through its fusectl file
// f (nil: none was given). A connection gone already (a clean unmount)
// answers ENOTCONN: nothing was left to abort.
func abortConn(f *os.File) error {
	if f == nil {
		return nil
	}
	defer f.Close()
	_, err := f.Write([]byte("1"))
	if errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
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
