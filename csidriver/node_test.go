package csidriver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// publishReq is a NodePublishVolume request of volume id at target.
func publishReq(id, target string, volCtx map[string]string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId: id, TargetPath: target, VolumeContext: volCtx,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER),
	}
}

func mustPublish(t *testing.T, d *Driver, req *csi.NodePublishVolumeRequest) {
	t.Helper()
	if _, err := (nodeServer{Driver: d}).NodePublishVolume(context.Background(), req); err != nil {
		t.Fatalf("publish %s at %s: %v", req.VolumeId, req.TargetPath, err)
	}
}

func mustUnpublish(t *testing.T, d *Driver, id, target string) {
	t.Helper()
	if _, err := (nodeServer{Driver: d}).NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("unpublish %s at %s: %v", id, target, err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target %s left after unpublish (%v)", target, err)
	}
}

// waitAudit waits for a line of the audit log at path that holds all of
// words: realmfs appends it as it refuses, the test reads until it is there.
func waitAudit(t *testing.T, path string, words ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if containsAll(sc.Text(), words) {
					f.Close()
					return
				}
			}
			f.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit line with %q in %s", words, path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// TestPublishGuards publishes a volume with a policy and checks the guard
// through the target, a second target sharing the daemon, and that the
// last unpublish leaves no mount and no daemon.
func TestPublishGuards(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	ctx := context.Background()
	params := map[string]string{"policy": "version: 1\ncredentials:\n  deny: [\"secrets/**\"]\n", "lockowner": "pid"}
	vol, err := (controllerServer{Driver: d.Driver}).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "ws", Parameters: params,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)}})
	if err != nil {
		t.Fatal(err)
	}
	dir := d.volumeDir("ws")
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".env", "secrets/key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("TOKEN=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b := filepath.Join(d.root, "pods/a/mount"), filepath.Join(d.root, "pods/b/mount")
	req := publishReq("ws", a, vol.Volume.VolumeContext)
	mustPublish(t, d.Driver, req)
	mustPublish(t, d.Driver, req) // idempotent

	m, err := mountAt(a)
	if err != nil || m == nil || m.Source != dir {
		t.Fatalf("no realmfs mount of %s at %s: %+v %v", dir, a, m, err)
	}
	for _, f := range []string{".env", "secrets/key"} {
		if _, err := os.ReadFile(filepath.Join(a, f)); !errors.Is(err, syscall.EACCES) {
			t.Errorf("read %s through the target: %v, want EACCES", f, err)
		}
	}
	audit := filepath.Join(d.stateDir("ws"), auditFile)
	waitAudit(t, audit, "secrets/key", "CREDENTIAL_PATH_DENIED")
	if err := os.WriteFile(filepath.Join(a, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(got) != "hello\n" {
		t.Fatalf("the workspace holds %q, %v", got, err)
	}

	// A second pod on the node shares the daemon: the same device.
	mustPublish(t, d.Driver, publishReq("ws", b, vol.Volume.VolumeContext))
	mb, err := mountAt(b)
	if err != nil || mb == nil || mb.Major != m.Major || mb.Minor != m.Minor {
		t.Fatalf("the second target is not the first mount bound: %+v %+v %v", m, mb, err)
	}
	pid, err := d.daemonPid(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := (nodeServer{Driver: d.Driver}).NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "ws", VolumePath: b})
	if err != nil || stats.VolumeCondition.Abnormal || len(stats.Usage) != 2 || stats.Usage[0].Total <= 0 {
		t.Fatalf("stats %v, %v", stats, err)
	}
	_, err = (controllerServer{Driver: d.Driver}).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "ws"})
	wantCode(t, err, codes.FailedPrecondition, "still mounted")

	mustUnpublish(t, d.Driver, "ws", a)
	if !answers(b) || !running(pid) {
		t.Fatal("unpublishing one target stopped the daemon serving the other")
	}
	mustUnpublish(t, d.Driver, "ws", b)
	if running(pid) {
		t.Fatalf("daemon %d still running after the last unpublish", pid)
	}
	mustUnpublish(t, d.Driver, "ws", b) // idempotent
}

// TestPublishRefusesBadPolicy: an invalid policy in the volume context, or
// an option realmfs refuses, is InvalidArgument with its reason, and
// nothing is mounted or left.
func TestPublishRefusesBadPolicy(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	target := filepath.Join(d.root, "pod/mount")
	_, err := (nodeServer{Driver: d.Driver}).NodePublishVolume(context.Background(), publishReq("eph", target, map[string]string{
		ephemeralKey: "true", "policy": "version: 1\ncredentials:\n  deny: [\"[\"]\n",
	}))
	wantCode(t, err, codes.InvalidArgument, "policy:3: credentials.deny[0]")
	if m, _ := mountAt(target); m != nil {
		t.Fatalf("mounted despite the bad policy: %+v", m)
	}

	// An option realmfs refuses (exit 2) is InvalidArgument with realmfs's
	// words, and the ephemeral workspace made for it is gone again.
	req := publishReq("eph", target, map[string]string{ephemeralKey: "true"})
	req.VolumeCapability.GetMount().MountFlags = []string{"bogus_option"}
	_, err = (nodeServer{Driver: d.Driver}).NodePublishVolume(context.Background(), req)
	wantCode(t, err, codes.InvalidArgument, "bogus_option")
	if _, err := os.Stat(d.volumeDir("eph")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed ephemeral publish left its workspace: %v", err)
	}
}

// TestDeadDaemon: a daemon that died is reported abnormal, and the next
// publish mounts the volume again.
func TestDeadDaemon(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	ctx := context.Background()
	target := filepath.Join(d.root, "pod/mount")
	req := publishReq("csi-eph1", target, map[string]string{ephemeralKey: "true"})
	mustPublish(t, d.Driver, req)
	if _, err := os.Stat(d.volumeDir("csi-eph1")); err != nil {
		t.Fatalf("the ephemeral workspace was not made: %v", err)
	}
	pid, err := d.daemonPid(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	w, err := openPid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.wait(wctx); err != nil {
		t.Fatal(err)
	}
	stats, err := (nodeServer{Driver: d.Driver}).NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "csi-eph1", VolumePath: target})
	if err != nil || !stats.VolumeCondition.Abnormal {
		t.Fatalf("stats of a dead mount: %v, %v; want abnormal", stats, err)
	}
	mustPublish(t, d.Driver, req)
	if !answers(target) {
		t.Fatal("the publish after the daemon died did not mount the volume again")
	}
	mustUnpublish(t, d.Driver, "csi-eph1", target)
	if _, err := os.Stat(d.volumeDir("csi-eph1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ephemeral workspace is left: %v", err)
	}
}

// TestAuditForwarded: a refusal on a published volume reaches the
// plugin's log as a JSON line naming the volume and the pod.
func TestAuditForwarded(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	target := filepath.Join(d.root, "pod/mount")
	mustPublish(t, d.Driver, publishReq("csi-eph2", target, map[string]string{
		ephemeralKey: "true", k8sPrefix + "pod.name": "agent", k8sPrefix + "pod.namespace": "team-a",
	}))
	writeFile := filepath.Join(d.volumeDir("csi-eph2"), ".env")
	if err := os.WriteFile(writeFile, []byte("K=v\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(target, ".env")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read .env: %v, want EACCES", err)
	}
	mustUnpublish(t, d.Driver, "csi-eph2", target)
	// The unpublish returns once the daemon has exited and its audit log
	// has been forwarded to its end.
	for _, l := range strings.Split(d.logs.String(), "\n") {
		if containsAll(l, []string{`"msg":"audit"`, `"volume":"csi-eph2"`, `"name":"agent"`, `"namespace":"team-a"`, `CREDENTIAL_PATH_DENIED`}) {
			return
		}
	}
	t.Fatalf("no forwarded audit line of the refusal in the plugin's log:\n%s", d.logs.String())
}

// TestOneWriterNode: a volume published for writing on one node is refused
// (FailedPrecondition, naming that node) to a writer on another node
// sharing the base dir, served to a reader there, and free for the other
// node once the first has unpublished it.
func TestOneWriterNode(t *testing.T) {
	needMounts(t)
	realmfs := buildRealmfs(t)
	root := t.TempDir()
	node := func(name string) *Driver {
		d, err := New(Config{NodeID: name, BaseDir: filepath.Join(root, "base"), StateDir: filepath.Join(root, name),
			Realmfs: realmfs, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unmountAll(t, d); d.Close() })
		return d
	}
	a, b := node("node-a"), node("node-b")
	if _, err := (controllerServer{Driver: a}).CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "ws",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}}); err != nil {
		t.Fatal(err)
	}
	ta, tb := filepath.Join(root, "pods/a/mount"), filepath.Join(root, "pods/b/mount")
	mustPublish(t, a, publishReq("ws", ta, nil))

	_, err := (nodeServer{Driver: b}).NodePublishVolume(context.Background(), publishReq("ws", tb, nil))
	wantCode(t, err, codes.FailedPrecondition, "published for writing on node node-a")
	if m, _ := mountAt(tb); m != nil {
		t.Fatalf("the refused publish mounted: %+v", m)
	}
	reader := publishReq("ws", tb, nil)
	reader.Readonly = true
	mustPublish(t, b, reader)
	mustUnpublish(t, b, "ws", tb)

	mustUnpublish(t, a, "ws", ta)
	mustPublish(t, b, publishReq("ws", tb, nil))
	mustUnpublish(t, b, "ws", tb)
	if _, err := os.Stat(b.writerPath("ws")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the writer claim is left after the last unpublish: %v", err)
	}
}

// TestPublishNamedPolicy: a volume naming a policy of the plugin's policy
// dir is mounted with that policy.
func TestPublishNamedPolicy(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	d.cfg.PolicyDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(d.cfg.PolicyDir, "strict.yaml"), []byte("version: 1\ncredentials:\n  deny: [\"notes/**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(d.root, "pod/mount")
	mustPublish(t, d.Driver, publishReq("csi-eph3", target, map[string]string{ephemeralKey: "true", "policyName": "strict"}))
	if err := os.MkdirAll(filepath.Join(d.volumeDir("csi-eph3"), "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.volumeDir("csi-eph3"), "notes", "a.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(target, "notes", "a.txt")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read notes/a.txt under the named policy: %v, want EACCES", err)
	}
	mustUnpublish(t, d.Driver, "csi-eph3", target)
}
