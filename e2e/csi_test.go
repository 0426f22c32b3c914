package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
}

// startCSI runs realm-csi with the test's dirs and returns once it serves:
// it logs "serving" after its socket listens.
func startCSI(t *testing.T, bin string, args ...string) *csiPlugin {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &csiPlugin{cmd: cmd, done: make(chan struct{})}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			t.Logf("realm-csi: %s", sc.Text())
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
	sock := strings.TrimPrefix(args[1], "unix://")
	if p.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
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
	bin, err := goBuild("realm-csi", "./cmd/realm-csi", "REALM_CSI_BIN", raceFlags()...)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	base, target := filepath.Join(root, "base"), filepath.Join(root, "pods", "p1", "mount")
	args := []string{"--endpoint", "unix://" + filepath.Join(root, "csi.sock"), "--nodeid", "node-1",
		"--base-dir", base, "--state-dir", filepath.Join(root, "state"), "--realmfs", realmfsBin}
	t.Cleanup(func() {
		if mountFSTypeIs(target, "fuse.realmfs") {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
	ctx := context.Background()

	plugin := startCSI(t, bin, args...)
	cc, nc := csi.NewControllerClient(plugin.conn), csi.NewNodeClient(plugin.conn)
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	vol, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters: map[string]string{"policy": "version: 1\n", "lockowner": "pid"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "volumes", "pvc-1")
	writeFile(t, filepath.Join(dir, ".env"), "KEY=secret\n")
	writeFile(t, filepath.Join(dir, "notes.txt"), "old\n")
	if _, err := nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target,
		VolumeCapability: capability, VolumeContext: vol.Volume.VolumeContext}); err != nil {
		t.Fatal(err)
	}

	// The guard, through the target.
	if _, err := os.ReadFile(filepath.Join(target, ".env")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read .env through the target: %v, want EACCES", err)
	}
	waitFileHolds(t, filepath.Join(root, "state", "volumes", "pvc-1", "audit.log"), `"CREDENTIAL_PATH_DENIED"`, `.env`)
	atomicWrite(t, filepath.Join(target, "notes.txt"), filepath.Join(dir, "notes.txt"))

	// The plugin dies; the workspace goes on serving.
	plugin.kill(syscall.SIGKILL)
	if got, err := os.ReadFile(filepath.Join(target, "notes.txt")); err != nil || string(got) != "new\n" {
		t.Fatalf("after the plugin's SIGKILL the mount reads %q, %v", got, err)
	}
	writeFile(t, filepath.Join(target, "after.txt"), "still here\n")
	if daemons := realmfsDaemons(dir); len(daemons) != 1 {
		t.Fatalf("realmfs daemons of the volume after the plugin's death: %v, want one", daemons)
	}

	// A new plugin finds the mount and unpublishes it cleanly.
	plugin = startCSI(t, bin, args...)
	nc = csi.NewNodeClient(plugin.conn)
	if _, err := nc.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if mountFSTypeIs(target, "fuse.realmfs") {
		t.Fatal("the target is still a realmfs mount after unpublish")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the target is left: %v", err)
	}
	if daemons := realmfsDaemons(dir); len(daemons) != 0 {
		t.Fatalf("realmfs processes left after unpublish: %v", daemons)
	}
	if _, err := csi.NewControllerClient(plugin.conn).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
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

// waitFileHolds waits until a line of the file at path holds every word.
func waitFileHolds(t *testing.T, path string, words ...string) {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		data, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if containsEvery(l, words) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no line with %q; it holds:\n%s", path, words, data)
		}
		time.Sleep(20 * time.Millisecond)
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
