package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// csiPlugin is a realm-csi process the test started.
type csiPlugin struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	conn *grpc.ClientConn

	mu    sync.Mutex
	lines []string // its log so far
	added chan struct{}
}

// waitLog waits until the plugin has logged a line holding every word.
func (p *csiPlugin) waitLog(t *testing.T, words ...string) {
	t.Helper()
	timeout := time.After(stateTimeout)
	for seen := 0; ; {
		p.mu.Lock()
		lines, added := p.lines, p.added
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if containsEvery(lines[seen], words) {
				return
			}
		}
		select {
		case <-added:
		case <-timeout:
			t.Fatalf("realm-csi logged no line with %q", words)
		}
	}
}

// startCSI runs realm-csi with args (which hold --endpoint) and returns
// once it serves, with a client of it: it logs "serving" after its socket
// listens.
func startCSI(t *testing.T, bin string, args ...string) *csiPlugin {
	t.Helper()
	return runCSI(t, exec.Command(bin, args...), args[slices.Index(args, "--endpoint")+1])
}

// runCSI starts cmd, which runs realm-csi (itself, or a container of it
// in the foreground) with its log on cmd's stderr, and returns once the
// plugin serves at endpoint, with a client of it.
func runCSI(t *testing.T, cmd *exec.Cmd, endpoint string) *csiPlugin {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &csiPlugin{cmd: cmd, done: make(chan struct{}), added: make(chan struct{})}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			t.Logf("realm-csi: %s", sc.Text())
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.added) // wakes waitLog: a line was added
			p.added = make(chan struct{})
			p.mu.Unlock()
			if !once && strings.Contains(sc.Text(), `"msg":"serving"`) {
				once = true
				close(serving)
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	select {
	case <-serving:
	case <-p.done:
		t.Fatal("realm-csi exited before serving")
	case <-time.After(stateTimeout):
		t.Fatal("realm-csi does not serve")
	}
	if p.conn, err = grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	return p
}

// kill signals the plugin and waits until it is gone.
func (p *csiPlugin) kill(sig syscall.Signal) {
	if p.conn != nil {
		p.conn.Close()
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

// realmfsDaemons lists the running realmfs processes serving dir.
func realmfsDaemons(dir string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		data, err := os.ReadFile(c)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if filepath.Base(args[0]) != "realmfs" || !strings.Contains(string(data), dir) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(c), "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i+2 < len(stat) && stat[i+2] != 'Z' {
			found = append(found, filepath.Base(filepath.Dir(c)))
		}
	}
	return found
}

// TestCSIMountOutlivesPlugin publishes a volume through realm-csi's gRPC
// socket, checks the guard through the target, kills the plugin with
// SIGKILL, finds the mount still serving, restarts the plugin, unpublishes
// with it, and finds no mount and no realmfs process left.
func TestCSIMountOutlivesPlugin(t *testing.T) {
	requireFUSE(t)
	plugin, v := publishCSIVolume(t, "pvc-1", map[string]string{"policy": "version: 1\n", "lockowner": "pid"},
		map[string]string{".env": "KEY=secret\n", "notes.txt": "old\n"})

	// The guard, through the target.
	if _, err := os.ReadFile(filepath.Join(v.target, ".env")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read .env through the target: %v, want EACCES", err)
	}
	waitForLine(t, filepath.Join(v.state, "volumes", "pvc-1", "audit.log"), `"CREDENTIAL_PATH_DENIED"`, `.env`)
	plugin.waitLog(t, `"msg":"audit"`, `"volume":"pvc-1"`, `"CREDENTIAL_PATH_DENIED"`, `.env`)
	atomicWrite(t, filepath.Join(v.target, "notes.txt"), filepath.Join(v.dir, "notes.txt"))

	// The plugin dies; the workspace goes on serving.
	plugin.kill(syscall.SIGKILL)
	if got, err := os.ReadFile(filepath.Join(v.target, "notes.txt")); err != nil || string(got) != "new\n" {
		t.Fatalf("after the plugin's SIGKILL the mount reads %q, %v", got, err)
	}
	writeFile(t, filepath.Join(v.target, "after.txt"), "still here\n")
	if daemons := realmfsDaemons(v.dir); len(daemons) != 1 {
		t.Fatalf("realmfs daemons of the volume after the plugin's death: %v, want one", daemons)
	}

	// A new plugin finds the mount and unpublishes it cleanly.
	plugin = startCSI(t, v.bin, v.args...)
	unpublishCSIVolume(t, plugin, "pvc-1", v)
	if _, err := csi.NewControllerClient(plugin.conn).DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace is left after DeleteVolume: %v", err)
	}
	plugin.kill(syscall.SIGTERM)
}

// mountFSTypeIs reports whether mountinfo lists a mount of type fstype at dir.
func mountFSTypeIs(dir, fstype string) bool {
	got, ok := mountFSType(dir)
	return ok && got == fstype
}

// atomicWrite writes "new" over path through the mount and checks that the
// backing file holds the old content until the close, the new after.
func atomicWrite(t *testing.T, path, backing string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, "new\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(backing); string(got) != "old\n" {
		t.Errorf("the workspace holds %q before the writer's close, want the old content", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(backing); string(got) != "new\n" {
		t.Errorf("the workspace holds %q after the close, want the new content", got)
	}
}

func containsEvery(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// csiVolume is a volume created and published through a realm-csi the
// test started: its workspace dir and the target it is mounted at.
type csiVolume struct {
	bin, dir, target, state string
	args                    []string
}

// publishCSIVolume starts realm-csi, creates volume name with params and
// publishes it at a target in a temp dir; files are written into the
// workspace before the publish.
func publishCSIVolume(t *testing.T, name string, params, files map[string]string) (*csiPlugin, *csiVolume) {
	t.Helper()
	bin, err := goBuild("realm-csi", "./cmd/realm-csi", "REALM_CSI_BIN", raceFlags()...)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	v := &csiVolume{bin: bin, target: filepath.Join(root, "pods", name, "mount"), state: filepath.Join(root, "state")}
	base := filepath.Join(root, "base")
	v.dir = filepath.Join(base, "volumes", name)
	v.args = []string{"--endpoint", "unix://" + filepath.Join(root, "csi.sock"), "--nodeid", "node-1",
		"--base-dir", base, "--state-dir", v.state, "--realmfs", realmfsBin}
	t.Cleanup(func() {
		if mountFSTypeIs(v.target, "fuse.realmfs") {
			_ = unix.Unmount(v.target, unix.MNT_DETACH)
		}
	})
	plugin := startCSI(t, bin, v.args...)
	createPublishCSIVolume(t, plugin, v, name, params, files)
	return plugin, v
}

// createPublishCSIVolume creates volume name with params through plugin,
// writes files into its workspace, and publishes it at v.target.
func createPublishCSIVolume(t *testing.T, plugin *csiPlugin, v *csiVolume, name string, params, files map[string]string) {
	t.Helper()
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
	}
	ctx := context.Background()
	vol, err := csi.NewControllerClient(plugin.conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name,
		VolumeCapabilities: []*csi.VolumeCapability{capability}, Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		writeFile(t, filepath.Join(v.dir, rel), data)
	}
	if _, err := csi.NewNodeClient(plugin.conn).NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: name,
		TargetPath: v.target, VolumeCapability: capability, VolumeContext: vol.Volume.VolumeContext}); err != nil {
		t.Fatal(err)
	}
}

// unpublishCSIVolume unpublishes v through plugin and checks that no
// mount, no target and no realmfs process of it is left.
func unpublishCSIVolume(t *testing.T, plugin *csiPlugin, name string, v *csiVolume) {
	t.Helper()
	if _, err := csi.NewNodeClient(plugin.conn).NodeUnpublishVolume(context.Background(),
		&csi.NodeUnpublishVolumeRequest{VolumeId: name, TargetPath: v.target}); err != nil {
		t.Fatal(err)
	}
	if mountFSTypeIs(v.target, "fuse.realmfs") {
		t.Fatal("the target is still a realmfs mount after unpublish")
	}
	if _, err := os.Lstat(v.target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the target is left: %v", err)
	}
	if daemons := realmfsDaemons(v.dir); len(daemons) != 0 {
		t.Fatalf("realmfs processes left after unpublish: %v", daemons)
	}
}

// TestCSIPodmanWorkspace runs a Podman container with a published
// volume's target as /workspace (as the kubelet hands a pod its volume):
// inside it a credential read is refused and audited and a write is
// atomic; while it writes a file, another lock owner's (this test's
// cgroup) write of it is EBUSY. The plugin's SIGKILL leaves the container
// working; a restarted plugin unpublishes once the container is gone,
// leaving no mount and no daemon.
func TestCSIPodmanWorkspace(t *testing.T) {
	c := newCtl(t)
	plugin, v := publishCSIVolume(t, "pvc-pod", map[string]string{"lockowner": "cgroup"},
		map[string]string{".env": "KEY=secret\n", "notes.txt": "old\n"})
	id := c.podman("run", "-d", "--network", "none", "-v", v.target+":/workspace", "localhost/realm-base:latest", "/bin/sleep", "1000")
	t.Cleanup(func() { _, _ = exec.Command("podman", "--url", c.sock, "rm", "-f", "-t", "0", id).CombinedOutput() })
	sh := func(script string) (string, error) {
		out, err := exec.Command("podman", "--url", c.sock, "exec", id, "/bin/sh", "-c", script).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	if out, err := sh("cat /workspace/.env"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("cat /workspace/.env in the container: %q, %v; want Permission denied", out, err)
	}
	waitForLine(t, filepath.Join(v.state, "volumes", "pvc-pod", "audit.log"), `"CREDENTIAL_PATH_DENIED"`, `.env`)
	if out, err := sh("echo new > /workspace/notes.txt && cat /workspace/notes.txt"); err != nil || out != "new" {
		t.Fatalf("write in the container: %q, %v", out, err)
	}
	if got, _ := os.ReadFile(filepath.Join(v.dir, "notes.txt")); string(got) != "new\n" {
		t.Fatalf("the workspace holds %q after the container's write", got)
	}

	// The container holds held.txt open for writing (ready.txt is made once
	// it does); this test's process is another owner.
	held := exec.Command("podman", "--url", c.sock, "exec", id, "/bin/sh", "-c",
		"exec 3>/workspace/held.txt; echo mine >&3; echo ready > /workspace/ready.txt; exec /bin/sleep 1000")
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Process.Kill(); _ = held.Wait() })
	waitForLine(t, filepath.Join(v.dir, "ready.txt"), "ready")
	if f, err := os.OpenFile(filepath.Join(v.target, "held.txt"), os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, syscall.EBUSY) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("a second owner's write of a file the container writes: %v, want EBUSY", err)
	}

	plugin.kill(syscall.SIGKILL)
	if out, err := sh("cat /workspace/notes.txt && echo after > /workspace/after.txt"); err != nil || out != "new" {
		t.Fatalf("the container after the plugin's SIGKILL: %q, %v", out, err)
	}

	plugin = startCSI(t, v.bin, v.args...)
	c.podman("rm", "-f", "-t", "0", id)
	_ = held.Wait()
	unpublishCSIVolume(t, plugin, "pvc-pod", v)
	plugin.kill(syscall.SIGTERM)
}
