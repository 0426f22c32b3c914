package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// csiImage is the realm-csi image tag the container tests build.
const csiImage = "localhost/realm-csi:e2e"

// TestCSIContainerRestart runs realm-csi in a Podman container as the node
// DaemonSet runs it (privileged, the host's pid and cgroup namespaces,
// /sys/fs/cgroup, /dev/fuse, the socket, base and target dirs with shared
// propagation, /run/realmfs from the host) with --daemon-cgroup, publishes
// a volume through its socket and has a workload container write through
// the mount. Removing the plugin's container kills every process of its
// cgroup; the daemon, in a cgroup of its own under the daemon cgroup, lives
// on, and the mount and the workload go on working. A new plugin container
// finds the mount and unpublishes it: no mount, no realmfs process and no
// volume cgroup is left. It does so also when the new container lacks
// the old one's /run/realmfs (the daemon's control socket, hence its pid,
// is out of reach): unpublish then waits for the volume's cgroup to empty.
func TestCSIContainerRestart(t *testing.T) {
	c := newCtl(t)
	unified := requireCgroup2(t)
	buildCSIImage(t)
	for i, tc := range []struct {
		name    string
		keepRun bool
	}{{"run-realmfs kept", true}, {"run-realmfs lost", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cg := filepath.Join(unified, "realm-csi-e2e-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i))
			csiContainerRestart(t, c, cg, tc.keepRun)
		})
	}
}

// csiContainerRestart is TestCSIContainerRestart with the daemon cgroup
// dir cg; keepRun gives the second plugin container the first one's
// /run/realmfs.
func csiContainerRestart(t *testing.T, c *ctl, cg string, keepRun bool) {
	root := sharedDir(t)
	const name = "pvc-ctr"
	v := &csiVolume{dir: filepath.Join(root, "base", "volumes", name), target: filepath.Join(root, "pods", name, "mount"),
		state: filepath.Join(root, "state")}
	v.args = []string{"--endpoint", "unix://" + filepath.Join(root, "csi", "csi.sock"), "--nodeid", "node-1",
		"--base-dir", filepath.Join(root, "base"), "--state-dir", v.state, "--daemon-cgroup", cg}
	t.Cleanup(func() { cleanDaemonCgroup(t, cg, v.target) })
	runRealmfs := t.TempDir() // the DaemonSet's hostPath at /run/realmfs

	plugin := startCSIContainer(t, c, "realm-csi-e2e", root, runRealmfs, v.args)
	plugin.waitLog(t, `"msg":"daemon cgroups"`, `"dir":"`+cg+`"`)
	createPublishCSIVolume(t, plugin, v, name, map[string]string{"lockowner": "cgroup"}, map[string]string{"notes.txt": "old\n"})
	if got, err := os.ReadFile(filepath.Join(v.target, "notes.txt")); err != nil || string(got) != "old\n" {
		t.Fatalf("the host reads %q, %v through the target the plugin's container mounted", got, err)
	}
	wid := c.podman("run", "-d", "--network", "none", "-v", v.target+":/workspace", "localhost/realm-base:latest", "/bin/sleep", "1000")
	t.Cleanup(func() { _, _ = exec.Command("podman", "--url", c.sock, "rm", "-f", "-t", "0", wid).CombinedOutput() })
	workload := func(script string) (string, error) {
		out, err := exec.Command("podman", "--url", c.sock, "exec", wid, "/bin/sh", "-c", script).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := workload("echo new > /workspace/notes.txt && cat /workspace/notes.txt"); err != nil || out != "new" {
		t.Fatalf("the workload's write: %q, %v", out, err)
	}
	daemons := realmfsDaemons(v.dir)
	if len(daemons) != 1 {
		t.Fatalf("realmfs daemons of the volume: %v, want one", daemons)
	}
	daemon, _ := strconv.Atoi(daemons[0])
	ctrID := c.podman("inspect", "-f", "{{.Id}}", "realm-csi-e2e")
	checkDaemonCgroup(t, daemon, "/"+filepath.Base(cg)+"/"+name, ctrID)
	daemonFD := pidfd(t, daemon)
	pluginPid, _ := strconv.Atoi(c.podman("inspect", "-f", "{{.State.Pid}}", "realm-csi-e2e"))
	pluginFD := pidfd(t, pluginPid)

	// The runtime kills every process of the plugin's container.
	c.podman("rm", "-f", "-t", "0", "realm-csi-e2e")
	<-plugin.done
	plugin.conn.Close()
	if !exited(t, pluginFD, stateTimeout) {
		t.Fatal("the plugin's process outlived its container")
	}
	if exited(t, daemonFD, 0) {
		t.Fatal("the realmfs daemon died with the plugin's container")
	}
	if got, err := os.ReadFile(filepath.Join(v.target, "notes.txt")); err != nil || string(got) != "new\n" {
		t.Fatalf("after the plugin's container is gone the host reads %q, %v", got, err)
	}
	if out, err := workload("cat /workspace/notes.txt && echo after > /workspace/after.txt"); err != nil || out != "new" {
		t.Fatalf("the workload after the plugin's container is gone: %q, %v", out, err)
	}
	if got, _ := os.ReadFile(filepath.Join(v.dir, "after.txt")); string(got) != "after\n" {
		t.Fatalf("the workspace holds %q after the workload's write", got)
	}

	// A new plugin container finds the mount and unpublishes it.
	if !keepRun {
		runRealmfs = t.TempDir()
	}
	plugin = startCSIContainer(t, c, "realm-csi-e2e", root, runRealmfs, v.args)
	plugin.waitLog(t, `"msg":"found a mount of a previous plugin"`, `"volume":"`+name+`"`, `"answering":true`)
	plugin.waitLog(t, `"msg":"daemon cgroups"`, `"kept":["`+name+`"]`)
	c.podman("rm", "-f", "-t", "0", wid)
	unpublishCSIVolume(t, plugin, name, v)
	if !keepRun {
		plugin.waitLog(t, `"msg":"the daemon's pid is unknown; waiting for its cgroup to empty"`)
	}
	if !exited(t, daemonFD, 0) {
		t.Fatal("the daemon runs on after unpublish")
	}
	if _, err := os.Stat(filepath.Join(cg, name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the volume's cgroup is left after unpublish: %v", err)
	}
	plugin.kill(syscall.SIGTERM)
}

// requireCgroup2 returns the mountpoint of the host's cgroup2 hierarchy
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host); without
// one the test skips (fails under CI=true).
func requireCgroup2(t *testing.T) string {
	t.Helper()
	found, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range found {
		if m.Root == "/" {
			return m.Mountpoint
		}
	}
	skipUnlessCI(t, "no cgroup2 hierarchy is mounted (realm-csi --daemon-cgroup needs one)")
	return ""
}

// buildCSIImage builds the realm-csi image with scripts/build-image.sh
// from static binaries (the image is FROM scratch), tagged csiImage.
func buildCSIImage(t *testing.T) {
	t.Helper()
	static := []string{"CGO_ENABLED=0"}
	if err := os.MkdirAll(filepath.Join(binDir, "image"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ name, pkg string }{{"realm-csi", "./cmd/realm-csi"}, {"realmfs", "./cmd/realmfs"}} {
		if _, err := goBuildEnv(static, filepath.Join("image", b.name), b.pkg, "", "-trimpath"); err != nil {
			t.Fatal(err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "scripts/build-image.sh", csiImage)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "REALM_IMAGE_BIN="+filepath.Join(binDir, "image"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-image.sh: %v\n%s", err, out)
	}
}

// sharedDir is a temp dir that is a shared mount (as the kubelet's pods
// dir is on a systemd host): a mount made under it in a container that
// binds it with rshared propagation appears on the host, and the host's
// appear in the container.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startCSIContainer runs the image's realm-csi with args in the
// foreground in a container named name, as the DaemonSet does, and returns
// once it serves.
func startCSIContainer(t *testing.T, c *ctl, name, root, runRealmfs string, args []string) *csiPlugin {
	t.Helper()
	t.Cleanup(func() { _, _ = exec.Command("podman", "--url", c.sock, "rm", "-f", "-t", "0", name).CombinedOutput() })
	run := append([]string{"--url", c.sock, "run", "--rm", "--name", name, "--network", "none",
		"--privileged", "--pid=host", "--cgroupns=host",
		"-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--device", "/dev/fuse",
		"-v", root + ":" + root + ":rshared", "-v", runRealmfs + ":/run/realmfs",
		csiImage}, args...)
	return runCSI(t, exec.Command("podman", run...), args[slices.Index(args, "--endpoint")+1])
}

// checkDaemonCgroup checks that the daemon pid is in the cgroup2 path want
// and in none of the plugin's container's cgroups (on a hybrid host its v1
// ones too).
func checkDaemonCgroup(t *testing.T, pid int, want, ctrID string) {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\n"+string(data), "\n0::"+want+"\n") {
		t.Fatalf("the daemon's cgroups are\n%s\nwant the cgroup2 path %s", data, want)
	}
	if strings.Contains(string(data), ctrID) {
		t.Fatalf("the daemon is still in a cgroup of the plugin's container %s:\n%s", ctrID, data)
	}
}

// pidfd opens a pidfd of pid, closed at the test's end.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// exited reports whether the process of pidfd fd has exited, waiting up to
// timeout for it (the pidfd turns readable).
func exited(t *testing.T, fd int, timeout time.Duration) bool {
	t.Helper()
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(timeout.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
}

// cleanDaemonCgroup undoes what a failed test leaves: the mount at target
// detached, the daemons in the daemon cgroup dir killed, the dir removed.
func cleanDaemonCgroup(t *testing.T, dir, target string) {
	if mountFSTypeIs(target, "fuse.realmfs") {
		_ = unix.Unmount(target, unix.MNT_DETACH)
	}
	subs, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs"))
	for _, procs := range subs {
		data, _ := os.ReadFile(procs)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				t.Logf("cleanup: killing realmfs %d left in %s", pid, filepath.Dir(procs))
				_ = unix.Kill(pid, unix.SIGKILL)
				if fd, err := unix.PidfdOpen(pid, 0); err == nil {
					exited(t, fd, stateTimeout)
					unix.Close(fd)
				}
			}
		}
		_ = unix.Rmdir(filepath.Dir(procs))
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		t.Errorf("cleanup: remove %s: %v", dir, err)
	}
}
