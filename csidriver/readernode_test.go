package csidriver

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// TestReaderNodeLeavesWritersTemps: the driver lets a volume be published
// read-only on another node while its writer node writes
// (docs/kubernetes.md: "pods on other nodes may only read"; the base dir
// is a file system the nodes share). The reader node's publish starts a
// realmfs daemon of its own over the same BACKING, whose mount-time sweep
// removed every .realm-tmp- file it did not own as a crash's: the writer
// node's temps, which hold its writers' uncommitted bytes (found by an
// adversarial review, 2026-12-04). A read-only mount removes nothing now,
// and no daemon removes a temp whose daemon lives (fusefs/templive).
//
// The second node is a second driver (another node id, its own state dir)
// whose base dir is a bind mount of the first's: the same files, a
// separate daemon, as on a node sharing the base dir (the bind path only
// keeps the second driver from finding the first's mount in this host's
// mountinfo, as another node would not).
func TestReaderNodeLeavesWritersTemps(t *testing.T) {
	needMounts(t)
	bin := buildRealmfs(t)
	a := startDriver(t, bin) // the writer node
	ctx := context.Background()
	capRW := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	if _, err := (controllerServer{Driver: a.Driver}).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "shared",
		VolumeCapabilities: []*csi.VolumeCapability{capRW}}); err != nil {
		t.Fatal(err)
	}
	backing := a.volumeDir("shared")
	orig := bytes.Repeat([]byte("old content\n"), 1000)
	if err := os.WriteFile(filepath.Join(backing, "data.txt"), orig, 0o644); err != nil {
		t.Fatal(err)
	}

	// Node A publishes for writing; a writer there starts rewriting data.txt.
	targetA := filepath.Join(a.root, "pods/writer/mount")
	reqA := &csi.NodePublishVolumeRequest{VolumeId: "shared", TargetPath: targetA, VolumeCapability: capRW}
	mustPublish(t, a.Driver, reqA)
	t.Cleanup(func() { _ = unix.Unmount(targetA, unix.MNT_DETACH) })
	f, err := os.OpenFile(filepath.Join(targetA, "data.txt"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	newContent := bytes.Repeat([]byte("new content\n"), 1000)
	if _, err := f.Write(newContent); err != nil {
		t.Fatal(err)
	}
	temps := func() []string {
		ents, _ := os.ReadDir(backing)
		var out []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".realm-tmp-") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	before := temps()
	if len(before) == 0 {
		f.Close()
		t.Fatal("the write in progress keeps no temp in BACKING")
	}
	t.Logf("writer's temp in progress: %v", before)

	// Node B: the same base dir (bind), its own state dir and node id.
	rootB := t.TempDir()
	baseB := filepath.Join(rootB, "base")
	if err := os.MkdirAll(baseB, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(a.cfg.BaseDir, baseB, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind the base dir: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(baseB, unix.MNT_DETACH) })
	b, err := New(Config{NodeID: "node-2", BaseDir: baseB, StateDir: filepath.Join(rootB, "state"),
		Realmfs: bin, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	targetB := filepath.Join(rootB, "pods/reader/mount")
	reqB := &csi.NodePublishVolumeRequest{VolumeId: "shared", TargetPath: targetB, Readonly: true,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	mustPublish(t, b, reqB) // allowed: a reader holds no writer claim
	t.Cleanup(func() { _ = unix.Unmount(targetB, unix.MNT_DETACH) })

	// B's mount-time scan runs in the background: its end is logged.
	waitAudit(t, filepath.Join(b.stateDir("shared"), logFile), "sweep done")
	after := temps()
	closeErr := f.Close()
	got, _ := os.ReadFile(filepath.Join(backing, "data.txt"))

	mustUnpublish(t, b, "shared", targetB)
	mustUnpublish(t, a.Driver, "shared", targetA)

	if len(after) < len(before) {
		t.Errorf("the reader node's publish removed the writer node's temp in progress: before %v, after %v", before, after)
	}
	if closeErr != nil {
		t.Errorf("the writer's close failed after the reader node's publish: %v", closeErr)
	}
	if !bytes.Equal(got, newContent) {
		t.Errorf("data.txt holds %d bytes (old=%v), want the writer's %d new bytes", len(got), bytes.Equal(got, orig), len(newContent))
	}
}
