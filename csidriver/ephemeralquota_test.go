package csidriver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // -1: refused
	}{
		{"0", 0}, {"4096", 4096}, {"1k", 1000}, {"1Ki", 1024}, {"3M", 3e6}, {"3Mi", 3 << 20},
		{"2G", 2e9}, {"2Gi", 2 << 30}, {"1T", 1e12}, {"1Ti", 1 << 40},
		{"", -1}, {"Gi", -1}, {"-1Gi", -1}, {"1.5Gi", -1}, {"2GB", -1}, {"2 Gi", -1}, {"9000000Ti", -1},
	} {
		got, err := ParseSize(tc.in)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestSizeOnlyForEphemeral: size is an inline ephemeral volume's, at most
// the plugin's bound; a StorageClass or a PersistentVolume that gives it
// is refused, naming where the size of one comes from.
func TestSizeOnlyForEphemeral(t *testing.T) {
	d := newTestDriver(t)
	d.cfg.EphemeralSize = 1 << 30
	ns := nodeServer{Driver: d}
	target := filepath.Join(t.TempDir(), "t")
	_, err := ns.NodePublishVolume(context.Background(), publishReq("pv", target, map[string]string{"size": "1Gi"}))
	wantCode(t, err, codes.InvalidArgument, "a PersistentVolume's size is its claim's storage request")
	_, err = ns.NodePublishVolume(context.Background(), publishReq("eph", target, map[string]string{ephemeralKey: "true", "size": "2Gi"}))
	wantCode(t, err, codes.InvalidArgument, "more than the plugin's --ephemeral-size")
	req := capacityReq("pv", 1<<20)
	req.Parameters = map[string]string{"size": "1Gi"}
	_, err = (controllerServer{Driver: d}).CreateVolume(context.Background(), req)
	wantCode(t, err, codes.InvalidArgument, "a PersistentVolume's size is its claim's storage request")
	for _, p := range []string{target, d.volumeDir("eph"), d.stateDir("eph")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("a refused publish made %s", p)
		}
	}
}

// TestEphemeralQuotaExt4: an inline ephemeral volume's workspace is a
// project of its own whose limit is its size (the plugin's bound, or its
// size attribute), so one pod's writes past it fail and leave the node's
// file system to the others; two volumes get two projects; stats report
// the limit; the limit goes with the volume.
func TestEphemeralQuotaExt4(t *testing.T) {
	mnt := mountQuotaExt4(t)
	d, err := New(Config{
		NodeID: "n", BaseDir: filepath.Join(mnt, "base"), StateDir: filepath.Join(t.TempDir(), "state"),
		Realmfs: "/nonexistent/realmfs", EphemeralSize: 1 << 20, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !d.quota {
		t.Fatal("ext4 mounted with prjquota: no project quota found")
	}
	prepare := func(id string, params volumeParams) {
		t.Helper()
		p := &publishRequest{id: id, dir: d.volumeDir(id), params: params, ephemeral: true}
		for range 2 { // a publish again (its daemon died) keeps the project
			if err := d.prepareWorkspace(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	prepare("a", volumeParams{})
	prepare("b", volumeParams{size: 512 << 10})
	for id, want := range map[string]struct {
		project uint32
		limit   int64
	}{"a": {ephemeralProjectBase, 1 << 20}, "b": {ephemeralProjectBase + 1, 512 << 10}} {
		if got, inherit, err := projectOf(d.volumeDir(id)); err != nil || got != want.project || !inherit {
			t.Fatalf("volume %s: project %d, inherit %v, %v; want %d", id, got, inherit, err, want.project)
		}
		if limit, _, err := projectUsage(d.volumeDir(id), want.project); err != nil || limit != want.limit {
			t.Fatalf("volume %s: limit %d, %v; want %d", id, limit, err, want.limit)
		}
	}
	writeAsNobody(t, filepath.Join(d.volumeDir("a"), "big"), 2<<20)
	st, err := (nodeServer{Driver: d}).NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: "a", VolumePath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if u := st.Usage[0]; u.Total != 1<<20 || u.Used <= 0 || u.Used > 1<<20 {
		t.Errorf("usage %+v: want the total 1 MiB and the file's bytes used", u)
	}
	if err := d.dropEphemeral("a"); err != nil {
		t.Fatal(err)
	}
	if limit, _, err := projectUsage(filepath.Join(d.cfg.BaseDir, volumesDir), ephemeralProjectBase); err != nil || limit != 0 {
		t.Errorf("after the volume went its project's limit is %d (%v), want none", limit, err)
	}
	prepare("c", volumeParams{})
	if got, _, err := projectOf(d.volumeDir("c")); err != nil || got != ephemeralProjectBase {
		t.Errorf("the next volume: project %d, %v; want the freed %d", got, err, ephemeralProjectBase)
	}
}

// TestEphemeralProjectsAllocated: an ephemeral volume's project is the
// lowest from ephemeralProjectBase no other ephemeral volume's publish
// state holds (a PersistentVolume's publish state holds none of that
// range's), and its size is recorded whether or not the file system
// enforces it. Runs on any file system: no quota is set.
func TestEphemeralProjectsAllocated(t *testing.T) {
	d := newTestDriver(t)
	d.cfg.EphemeralSize = 1 << 30
	for id, ps := range map[string]publishState{
		"x": {Ephemeral: true, ProjectID: ephemeralProjectBase},
		"y": {Ephemeral: true, ProjectID: ephemeralProjectBase + 2},
		"z": {ProjectID: ephemeralProjectBase + 1}, // not ephemeral: passed over
	} {
		must(t, os.MkdirAll(d.stateDir(id), 0o700))
		data, err := json.Marshal(ps)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(d.stateDir(id), publishFile), data, 0o600))
	}
	if got, err := d.freeEphemeralProject(); err != nil || got != ephemeralProjectBase+1 {
		t.Fatalf("freeEphemeralProject = %d, %v; want %d", got, err, ephemeralProjectBase+1)
	}
	for _, tc := range []struct {
		id   string
		size int64
		want int64
	}{{"bound", 0, 1 << 30}, {"asked", 4 << 20, 4 << 20}} {
		p := &publishRequest{id: tc.id, dir: d.volumeDir(tc.id), params: volumeParams{size: tc.size}, ephemeral: true}
		must(t, d.prepareWorkspace(p))
		if ps := d.readPublishState(tc.id); ps.SizeBytes != tc.want || (ps.ProjectID != 0) != d.quota {
			t.Errorf("volume %s: publish state %+v; want size %d, a project only with quotas (%v)", tc.id, ps, tc.want, d.quota)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
