package csidriver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// daemonCgroups is the cgroup2 directory the realmfs daemons run in
// (--daemon-cgroup): each volume's daemon is started into a child of its
// own, DIR/<volume id>, so that it is not in the plugin's container's
// cgroup and a restart of that container (the runtime kills every process
// of the container's cgroup) leaves it serving. An operator limits the
// daemons together through DIR's own files (memory.max, pids.max, ...).
type daemonCgroups struct {
	dir string
	// v1 is the cgroup.procs file of the root of every cgroup v1 hierarchy
	// on a hybrid host: there a container's processes are also in its v1
	// cgroups, and the runtime finds the processes it kills there
	// (runc reads the devices hierarchy), so each daemon is moved to the
	// v1 roots too.
	v1 []string
}

// openDaemonCgroups checks dir and makes it: a directory of a cgroup2 file
// system that is not inside the plugin's own cgroup (a daemon there would
// die with the plugin's container).
func openDaemonCgroups(dir string) (*daemonCgroups, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	c := &daemonCgroups{dir: dir}
	var m *mountinfo.Info
	for _, i := range mounts {
		switch {
		case i.FSType == "cgroup2" && within(dir, i.Mountpoint) && (m == nil || len(i.Mountpoint) > len(m.Mountpoint)):
			m = i
		case i.FSType == "cgroup" && exists(filepath.Join(i.Mountpoint, "release_agent")):
			// Only a v1 hierarchy's root has release_agent: the mount shows
			// the host's root, whatever mountinfo's root says in a cgroup
			// namespace.
			c.v1 = append(c.v1, filepath.Join(i.Mountpoint, "cgroup.procs"))
		}
	}
	if m == nil {
		return nil, fmt.Errorf("--daemon-cgroup %s: not in a cgroup2 file system (on a hybrid host the cgroup2 tree is /sys/fs/cgroup/unified)", dir)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own, err := unifiedCgroup(string(self))
	if err != nil {
		return nil, err
	}
	ownDir, known := cgroupDir(m.Mountpoint, m.Root, own)
	if !known {
		// A cgroup namespace of its own looking at the host's tree: the
		// plugin's cgroup has no name in it, but it is the cgroup on
		// DIR's path whose cgroup.procs lists the plugin.
		ownDir = holdingSelf(dir, m.Mountpoint)
	}
	if ownDir != "" && insideOwn(dir, ownDir, !exists(filepath.Join(ownDir, "cgroup.events"))) {
		return nil, fmt.Errorf("--daemon-cgroup %s is inside the plugin's own cgroup %s: its daemons would die with the plugin's container (give a directory outside it, and the container the host's /sys/fs/cgroup)", dir, ownDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--daemon-cgroup: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("--daemon-cgroup: %w", err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("--daemon-cgroup %s: not in a cgroup2 file system (type %#x)", dir, st.Type)
	}
	return c, nil
}

// unifiedCgroup is the cgroup2 path in /proc/self/cgroup's text (its
// "0::" line).
func unifiedCgroup(procCgroup string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(procCgroup))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("/proc/self/cgroup has no cgroup2 line (0::)")
}

// cgroupDir is the directory of cgroup path own (as /proc/self/cgroup
// names it) in a cgroup2 mount at mountPoint showing the hierarchy from
// root (mountinfo's root), and whether that is known: not when own is
// outside what the mount shows, nor when the mount shows more than the
// plugin's cgroup namespace (a root of "/.." components: the host's
// /sys/fs/cgroup mounted into a container with a cgroup namespace of its
// own, whose /proc/self/cgroup says "/").
func cgroupDir(mountPoint, root, own string) (string, bool) {
	if slices.Contains(strings.Split(root, "/"), "..") {
		return "", false
	}
	rel, err := filepath.Rel(root, own)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(mountPoint, rel), true
}

// holdingSelf is the cgroup among dir and its parents up to mountPoint
// whose cgroup.procs lists this process, or "".
func holdingSelf(dir, mountPoint string) string {
	self := strconv.Itoa(os.Getpid())
	for a := dir; within(a, mountPoint); a = filepath.Dir(a) {
		data, err := os.ReadFile(filepath.Join(a, "cgroup.procs"))
		if err == nil && slices.Contains(strings.Fields(string(data)), self) {
			return a
		}
		if a == mountPoint {
			break
		}
	}
	return ""
}

// insideOwn reports whether dir is in the plugin's cgroup ownDir, where a
// container runtime that kills the container's cgroup kills it too. The
// hierarchy's root (ownIsRoot: a plugin outside any container, with no
// cgroup namespace) is killed by no one. A cgroup namespace's root is not
// the hierarchy's: it has the files only a non-root cgroup has
// (cgroup.events), so a private cgroup namespace is refused.
func insideOwn(dir, ownDir string, ownIsRoot bool) bool {
	return !ownIsRoot && within(dir, ownDir)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// cgroupNameRE is a volume's cgroup name: the characters of a volume id and
// no dot, so that it never names a cgroup's interface file
// (cgroup.procs, memory.max).
var cgroupNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// cgroupName is the name of volume id's cgroup, or an error for an id that
// is not one (never a path or a control file's name).
func cgroupName(id string) (string, error) {
	if !cgroupNameRE.MatchString(id) {
		return "", fmt.Errorf("volume id %q is not a cgroup name", id)
	}
	return id, nil
}

func (c *daemonCgroups) path(id string) (string, error) {
	name, err := cgroupName(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.dir, name), nil
}

// open makes volume id's cgroup if needed and opens it, for
// SysProcAttr.CgroupFD.
func (c *daemonCgroups) open(id string) (*os.File, error) {
	p, err := c.path(id)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("make the daemon's cgroup: %w", err)
	}
	return os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY, 0)
}

// leaveV1 moves pid to the root of every cgroup v1 hierarchy (a hybrid
// host; nothing to do on a cgroup2-only one).
func (c *daemonCgroups) leaveV1(pid int) error {
	var errs []error
	for _, procs := range c.v1 {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
			errs = append(errs, fmt.Errorf("move %d to %s: %w", pid, procs, err))
		}
	}
	return errors.Join(errs...)
}

// remove waits until volume id's cgroup holds no process (its daemon has
// exited: the caller unmounted its last mount), then removes it. A cgroup
// that is not there is removed already.
func (c *daemonCgroups) remove(ctx context.Context, id string) error {
	p, err := c.path(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	if err := waitEmpty(ctx, filepath.Join(p, "cgroup.events")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("the daemon's cgroup %s: %w", p, err)
	}
	if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove the daemon's cgroup %s: %w", p, err)
	}
	return nil
}

// waitEmpty returns once cgroup.events says "populated 0". The kernel
// wakes a poll of the file (POLLPRI) when the value changes; the file is
// read again at least every second anyway.
func waitEmpty(ctx context.Context, events string) error {
	f, err := os.Open(events)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte("populated 0")) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("still holds a process: %w", ctx.Err())
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, 1000); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// sweep removes the empty volume cgroups a previous plugin left (a
// daemon that died, an unpublish interrupted); one a daemon still lives in
// (EBUSY) is kept.
func (c *daemonCgroups) sweep() (removed, kept []string) {
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := unix.Rmdir(filepath.Join(c.dir, e.Name())); err != nil {
			kept = append(kept, e.Name())
		} else {
			removed = append(removed, e.Name())
		}
	}
	return removed, kept
}
