package csidriver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// fsType is the type realmfs mounts show in mountinfo.
const fsType = "fuse.realmfs"

// mountTimeout bounds a realmfs start (it returns once the mount serves)
// and the wait for a daemon to exit after its unmount.
const mountTimeout = 30 * time.Second

// volumeMounts returns the realmfs mounts of volume id on this node (of
// every volume under the base dir for id ""). The mount's source is the
// directory realmfs serves (its default fsname).
func (d *Driver) volumeMounts(id string) ([]*mountinfo.Info, error) {
	root := filepath.Join(d.cfg.BaseDir, volumesDir)
	return mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		if i.FSType != fsType {
			return true, false
		}
		if id != "" {
			return i.Source != filepath.Join(root, id), false
		}
		return filepath.Dir(i.Source) != root, false
	})
}

// mountAt returns the realmfs mount at target (the top one if several are
// stacked), or nil.
func mountAt(target string) (*mountinfo.Info, error) {
	found, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	if err != nil || len(found) == 0 {
		return nil, err
	}
	top := found[len(found)-1]
	if top.FSType != fsType {
		return nil, nil
	}
	return top, nil
}

// isMountPoint reports whether anything is mounted at target.
func isMountPoint(target string) bool {
	found, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	return err == nil && len(found) > 0
}

// answers reports whether the daemon behind the mount at target answers.
// statfs is the probe because the kernel always asks the daemon for it; a
// mount whose daemon died answers ENOTCONN.
func answers(target string) bool {
	var st unix.Statfs_t
	return unix.Statfs(target, &st) == nil
}

// startRealmfs runs realmfs for volume id and returns once the mount
// serves. realmfs detaches its daemon; the daemon is started in its own
// session so that it does not die with the plugin's process group: a
// plugin killed or upgraded leaves its mounts serving. With a daemon
// cgroup it is also started into the volume's cgroup (clone3's
// CLONE_INTO_CGROUP; the daemon realmfs forks inherits it), out of the
// plugin's container's. What realmfs prints on a failure is its reason
// (exit 2: a usage error or an invalid policy).
func (d *Driver) startRealmfs(ctx context.Context, id string, args []string) error {
	ctx, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.cfg.Realmfs, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if d.cg != nil {
		cg, err := d.cg.open(id)
		if err != nil {
			return err
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	d.cfg.Log.Info("starting realmfs", "args", args)
	if err := cmd.Start(); err != nil {
		if d.cg != nil {
			// clone3 into a cgroup the plugin may not migrate to (ENOENT
			// with a cgroup namespace of its own on a host mounting cgroup2
			// with nsdelegate; EACCES) fails here.
			return fmt.Errorf("start realmfs into the cgroup %s: %w", filepath.Join(d.cg.dir, id), err)
		}
		return fmt.Errorf("start realmfs: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return &realmfsError{err: err, out: strings.TrimSpace(out.String())}
	}
	return nil
}

// leaveV1 moves the daemon serving target out of the plugin's cgroup v1
// hierarchies on a hybrid host (see daemonCgroups.v1). A daemon left
// there serves on, but dies with the plugin's container: a warning.
func (d *Driver) leaveV1(ctx context.Context, id, target string) {
	if d.cg == nil || len(d.cg.v1) == 0 {
		return
	}
	pid, err := d.daemonPid(ctx, target)
	if err == nil {
		err = d.cg.leaveV1(pid)
	}
	if err != nil {
		d.cfg.Log.Warn("the daemon stays in the plugin's cgroup v1 hierarchies: it dies with the plugin's container", "volume", id, "error", err)
	}
}

// realmfsError is a failed realmfs start: its exit status and its words.
type realmfsError struct {
	err error
	out string
}

func (e *realmfsError) Error() string { return fmt.Sprintf("realmfs: %v: %s", e.err, e.out) }
func (e *realmfsError) Unwrap() error { return e.err }

// usage reports whether realmfs refused its arguments (exit 2).
func (e *realmfsError) usage() bool {
	var ee *exec.ExitError
	return errors.As(e.err, &ee) && ee.ExitCode() == 2
}

// daemonPid asks the daemon serving target for its pid (realmfs status,
// which the daemon answers itself through its control socket).
func (d *Driver) daemonPid(ctx context.Context, target string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, d.cfg.Realmfs, "status", target, "-o", "json").Output()
	if err != nil {
		return 0, fmt.Errorf("realmfs status %s: %w", target, err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&st); err != nil || st.Pid <= 0 {
		return 0, fmt.Errorf("realmfs status %s: no pid in %q", target, out)
	}
	return st.Pid, nil
}

// unmount unmounts target: umount(2) as root, fusermount3 -u otherwise.
// A mount whose daemon is dead, or one still busy, is detached lazily
// (nothing can be served from it any more).
func unmount(target string) error {
	var err error
	if os.Geteuid() == 0 {
		err = unix.Unmount(target, 0)
	} else if out, ferr := exec.Command("fusermount3", "-u", target).CombinedOutput(); ferr != nil {
		err = fmt.Errorf("fusermount3 -u: %w: %s", ferr, bytes.TrimSpace(out))
	}
	if err == nil || !isMountPoint(target) {
		return nil
	}
	if os.Geteuid() == 0 {
		if derr := unix.Unmount(target, unix.MNT_DETACH); derr == nil {
			return nil
		}
	} else if exec.Command("fusermount3", "-uz", target).Run() == nil {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", target, err)
}

// pidWaiter waits for a process that is not the plugin's child to exit,
// by its pidfd (opened before the unmount, so the pid cannot have been
// reused by then).
type pidWaiter struct {
	pid int
	fd  int
}

func openPid(pid int) (*pidWaiter, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &pidWaiter{pid: pid, fd: fd}, nil
}

// wait returns once the process has exited (its pidfd is readable), or an
// error when ctx ends first.
func (w *pidWaiter) wait(ctx context.Context) error {
	defer unix.Close(w.fd)
	for {
		ms := 1000
		if dl, ok := ctx.Deadline(); ok {
			ms = min(ms, max(int(time.Until(dl).Milliseconds()), 0))
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll the pidfd of %d: %w", w.pid, err)
		}
		if n > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("realmfs daemon %d still running after its unmount: %w", w.pid, ctx.Err())
		}
	}
}
