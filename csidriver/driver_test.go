package csidriver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func newTestDriver(t *testing.T) *Driver {
	t.Helper()
	root := t.TempDir()
	d, err := New(Config{
		NodeID: "n", BaseDir: filepath.Join(root, "base"), StateDir: filepath.Join(root, "state"),
		Realmfs: "/nonexistent/realmfs", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// wantCode checks err's gRPC code and that its message holds want.
func wantCode(t *testing.T, err error, code codes.Code, want string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), want) {
		t.Fatalf("got %v %q, want %v with %q", st.Code(), st.Message(), code, want)
	}
}

func TestCheckCapability(t *testing.T) {
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	ext4 := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	ext4.GetMount().FsType = "ext4"
	for _, tc := range []struct {
		name string
		cap  *csi.VolumeCapability
		want string // "" accepted, else a part of the refusal
	}{
		{"single node writer", mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), ""},
		{"single node multi writer", mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER), ""},
		{"single node single writer", mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER), ""},
		{"single node reader", mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY), ""},
		{"multi node reader", mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), ""},
		{"multi node multi writer", mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), "lock table"},
		{"multi node single writer", mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER), "one writer node"},
		{"unknown mode", mountCap(csi.VolumeCapability_AccessMode_UNKNOWN), "unknown"},
		{"block", block, "block"},
		{"ext4", ext4, "fs_type"},
		{"none", nil, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCapability(tc.cap)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, codes.InvalidArgument, tc.want)
		})
	}
}

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   string // "" accepted, else a part of the InvalidArgument message
	}{
		{"none", nil, ""},
		{"blank policy: the built-in one", map[string]string{"policy": " \n"}, ""},
		{"all", map[string]string{"policy": "version: 1\n", "lockowner": "session", "durability": "atomic"}, ""},
		{"kubernetes keys passed over", map[string]string{ephemeralKey: "true", k8sPrefix + "pod.name": "p"}, ""},
		{"bad glob: file, line and field", map[string]string{"policy": "version: 1\ncredentials:\n  deny: [\"[\"]\n"}, "policy:3: credentials.deny[0]: bad glob"},
		{"misspelt policy field", map[string]string{"policy": "version: 1\ncredentails: {}\n"}, "policy:2: credentails: unknown field"},
		{"bad lockowner", map[string]string{"lockowner": "thread"}, "lockowner=\"thread\""},
		{"bad durability", map[string]string{"durability": "none"}, "durability=\"none\""},
		{"misspelt parameter", map[string]string{"lockOwner": "pid"}, "unknown parameter \"lockOwner\""},
		{"policy name", map[string]string{"policyName": "strict"}, ""},
		{"policy name with a path", map[string]string{"policyName": "../etc/x"}, "policyName=\"../etc/x\""},
		{"two policies", map[string]string{"policyName": "strict", "policy": "version: 1\n"}, "give one policy"},
		{"size", map[string]string{"size": "2Gi"}, ""},
		{"size of nothing", map[string]string{"size": "0"}, "size=\"0\""},
		{"size in a unit unknown", map[string]string{"size": "2GB"}, "size=\"2GB\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseParams(tc.params)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(tc.params["policy"]) == "" && p.policy != "" {
					t.Fatalf("a blank policy is kept as %q: realmfs would be handed an empty file", p.policy)
				}
				return
			}
			wantCode(t, err, codes.InvalidArgument, tc.want)
		})
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		p        volumeParams
		readOnly bool
		flags    []string
		want     string
	}{
		{volumeParams{}, false, nil, "allow_other"},
		{volumeParams{lockOwner: "pid", durability: "full"}, true, []string{"noatime"}, "allow_other,lockowner=pid,durability=full,ro,noatime"},
	} {
		if got := tc.p.options(tc.readOnly, tc.flags); got != tc.want {
			t.Errorf("options(%+v, %v, %v) = %q, want %q", tc.p, tc.readOnly, tc.flags, got, tc.want)
		}
	}
}

func TestCreateVolume(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	caps := []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	req := func(name string, size int64, params map[string]string) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: caps, Parameters: params,
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}}
	}
	v, err := (controllerServer{Driver: d}).CreateVolume(ctx, req("ws", 1<<30, map[string]string{"lockowner": "pid"}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Volume.VolumeId != "ws" || v.Volume.CapacityBytes != 1<<30 || v.Volume.VolumeContext["lockowner"] != "pid" {
		t.Fatalf("created %v", v.Volume)
	}
	if _, err := (controllerServer{Driver: d}).CreateVolume(ctx, req("ws", 1<<30, map[string]string{"lockowner": "pid"})); err != nil {
		t.Fatalf("the same request again: %v", err)
	}
	_, err = (controllerServer{Driver: d}).CreateVolume(ctx, req("ws", 2<<30, map[string]string{"lockowner": "pid"}))
	wantCode(t, err, codes.AlreadyExists, "ws")
	_, err = (controllerServer{Driver: d}).CreateVolume(ctx, req("ws", 1<<30, nil))
	wantCode(t, err, codes.AlreadyExists, "ws")
	_, err = (controllerServer{Driver: d}).CreateVolume(ctx, req("bad", 0, map[string]string{"policy": "version: 2\n"}))
	wantCode(t, err, codes.InvalidArgument, "policy:1: version")
	for _, bad := range []string{"../up", "ws.json", "ws.writer", ".hidden"} {
		_, err = (controllerServer{Driver: d}).CreateVolume(ctx, req(bad, 0, nil))
		wantCode(t, err, codes.InvalidArgument, "volume name")
	}
	multi := &csi.CreateVolumeRequest{Name: "rwx", VolumeCapabilities: []*csi.VolumeCapability{
		mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}}
	_, err = (controllerServer{Driver: d}).CreateVolume(ctx, multi)
	wantCode(t, err, codes.InvalidArgument, "one writer node")

	if _, err := (controllerServer{Driver: d}).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "ws"}); err != nil {
		t.Fatal(err)
	}
	if _, err := (controllerServer{Driver: d}).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "ws"}); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	_, err = (controllerServer{Driver: d}).ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "ws", VolumeCapabilities: caps})
	wantCode(t, err, codes.NotFound, "ws")
}

func TestListVolumesPages(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	caps := []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	for _, n := range []string{"c", "a", "e", "b", "d"} {
		if _, err := (controllerServer{Driver: d}).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: n, VolumeCapabilities: caps}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("more pages than volumes")
		}
		resp, err := (controllerServer{Driver: d}).ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Entries {
			got = append(got, e.Volume.VolumeId)
		}
		if tok = resp.NextToken; tok == "" {
			break
		}
	}
	if strings.Join(got, "") != "abcde" {
		t.Fatalf("listed %v", got)
	}
	for _, tok := range []string{"x", "-1", "6"} {
		_, err := (controllerServer{Driver: d}).ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: tok})
		wantCode(t, err, codes.Aborted, tok)
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ endpoint, want string }{
		{"unix://" + filepath.Join(dir, "a.sock"), ""},
		{filepath.Join(dir, "b.sock"), ""},
		{"tcp://127.0.0.1:1", "only unix://"},
		{"unix://", "no socket path"},
	} {
		lis, err := Listen(tc.endpoint)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.endpoint, err)
				continue
			}
			// A killed plugin leaves its socket; the next one replaces it.
			lis.(*net.UnixListener).SetUnlinkOnClose(false)
			lis.Close()
			if lis, err = Listen(tc.endpoint); err != nil {
				t.Errorf("%s again: %v", tc.endpoint, err)
			} else {
				lis.Close()
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.endpoint, err, tc.want)
		}
	}
}

func TestNamedPolicy(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	dir := t.TempDir()
	for name, data := range map[string]string{"strict": "version: 1\n", "broken": "version: 1\nprotect: {paths: [\"[\"]}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	caps := []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	create := func(name string) error {
		_, err := (controllerServer{Driver: d}).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v-" + name, VolumeCapabilities: caps,
			Parameters: map[string]string{"policyName": name}})
		return err
	}
	wantCode(t, create("strict"), codes.InvalidArgument, "holds no policies (--policy-dir)")
	d.cfg.PolicyDir = dir
	if err := create("strict"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, create("broken"), codes.InvalidArgument, "broken.yaml:2: protect.paths[0]")
	wantCode(t, create("absent"), codes.InvalidArgument, "absent.yaml: cannot read")
}
