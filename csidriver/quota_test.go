package csidriver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

func TestLowestFreeProject(t *testing.T) {
	const b = projectIDBase
	for _, tc := range []struct {
		name string
		used []uint32
		want uint32
	}{
		{"none", nil, b},
		{"first taken", []uint32{b}, b + 1},
		{"a gap", []uint32{b, b + 2, b + 1, b + 4}, b + 3},
		{"unsorted, below the base ignored", []uint32{7, b + 1, 1}, b},
		{"duplicates", []uint32{b, b, b + 1}, b + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lowestFreeProject(tc.used); got != tc.want {
				t.Errorf("lowestFreeProject(%v) = %d, want %d", tc.used, got, tc.want)
			}
		})
	}
}

// The kernel's structs, as the UAPI headers lay them out (a C program
// printing sizeof gave these).
func TestQuotaStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"struct fsxattr", unsafe.Sizeof(fsxattr{}), 28},
		{"fsxattr.fsx_projid", unsafe.Offsetof(fsxattr{}.Projid), 12},
		{"struct if_dqblk", unsafe.Sizeof(ifDqblk{}), 72},
		{"if_dqblk.dqb_curspace", unsafe.Offsetof(ifDqblk{}.CurSpace), 16},
		{"if_dqblk.dqb_valid", unsafe.Offsetof(ifDqblk{}.Valid), 64},
		{"struct fs_quota_statv", unsafe.Sizeof(fsQuotaStatV{}), 160},
		{"fs_quota_statv.qs_flags", unsafe.Offsetof(fsQuotaStatV{}.Flags), 2},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if got := qcmd(qXGetQStatV, prjQuota); got != 0x580802 {
		t.Errorf("QCMD(Q_XGETQSTATV, PRJQUOTA) = %#x, want 0x580802", got)
	}
}

// A record keeps its project id; one written before there were project
// ids reads as none, and none is not written.
func TestRecordProject(t *testing.T) {
	d := newTestDriver(t)
	created := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		r    record
	}{
		{"with a project", record{Name: "a", CapacityBytes: 1 << 20, Created: created, ProjectID: projectIDBase + 3}},
		{"without", record{Name: "b", CapacityBytes: 1 << 20, Parameters: map[string]string{"lockowner": "pid"}, Created: created}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.writeRecord(&tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := d.readRecord(tc.r.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got.ProjectID != tc.r.ProjectID || got.CapacityBytes != tc.r.CapacityBytes || !got.Created.Equal(created) {
				t.Errorf("read back %+v, want %+v", got, tc.r)
			}
			data, _ := os.ReadFile(d.recordPath(tc.r.Name))
			if has := bytes.Contains(data, []byte(`"project_id"`)); has != (tc.r.ProjectID != 0) {
				t.Errorf("record %s holds project_id: %v, want %v", data, has, tc.r.ProjectID != 0)
			}
		})
	}
	old := `{"name": "old", "capacity_bytes": 5, "created": "2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(d.recordPath("old"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := d.readRecord("old"); err != nil || r.ProjectID != 0 {
		t.Fatalf("an older record: %+v, %v; want project 0", r, err)
	}
}

// allocProject passes over the ids the records hold.
func TestAllocProject(t *testing.T) {
	d := controllerServer{Driver: newTestDriver(t)}
	for name, id := range map[string]uint32{"a": projectIDBase, "b": projectIDBase + 2, "c": 0} {
		if err := d.writeRecord(&record{Name: name, ProjectID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []uint32{projectIDBase + 1, projectIDBase + 3} {
		id, err := d.allocProject()
		if err != nil || id != want {
			t.Fatalf("allocProject = %d, %v; want %d", id, err, want)
		}
		if err := d.writeRecord(&record{Name: fmt.Sprintf("new%d", id), ProjectID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPersistentProjectsStopShortOfEphemeral: persistent volumes never
// take an id of the ephemeral volumes' range, whose allocation does not
// see them.
func TestPersistentProjectsStopShortOfEphemeral(t *testing.T) {
	used := make([]uint32, 0, ephemeralProjectBase-projectIDBase)
	for id := uint32(projectIDBase); id < ephemeralProjectBase-1; id++ {
		used = append(used, id)
	}
	if id, err := persistentProject(used); err != nil || id != ephemeralProjectBase-1 {
		t.Fatalf("the last id: %d, %v; want %d", id, err, ephemeralProjectBase-1)
	}
	used = append(used, ephemeralProjectBase-1)
	if id, err := persistentProject(used); err == nil || !strings.Contains(err.Error(), "are taken") {
		t.Fatalf("past the range: %d, %v; want an error", id, err)
	}
}

// FS_IOC_FSGETXATTR answers on the temp dir's file system (ext4, XFS,
// btrfs and tmpfs have it): the ioctl number encodes the struct's size, so
// a wrong layout would be ENOTTY.
func TestProjectOf(t *testing.T) {
	_, _, err := projectOf(t.TempDir())
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the temp dir's file system has no FS_IOC_FSGETXATTR: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func capacityReq(name string, size int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size}}
}

// Where the base dir's file system has no project quota, the capacity is
// recorded and reported, and the volume's usage is its file system's.
func TestCapacityWithoutProjectQuota(t *testing.T) {
	d := newTestDriver(t)
	if d.quota {
		t.Skip("the temp dir's file system enforces project quotas")
	}
	ctx := context.Background()
	v, err := (controllerServer{Driver: d}).CreateVolume(ctx, capacityReq("ws", 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if v.Volume.CapacityBytes != 1<<20 {
		t.Errorf("capacity %d, want 1 MiB", v.Volume.CapacityBytes)
	}
	if r, err := d.readRecord("ws"); err != nil || r.CapacityBytes != 1<<20 || r.ProjectID != 0 {
		t.Fatalf("record %+v, %v: want the capacity and no project", r, err)
	}
	st, err := (nodeServer{Driver: d}).NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "ws", VolumePath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(d.volumeDir("ws"), &fs); err != nil {
		t.Fatal(err)
	}
	if total := st.Usage[0].Total; total != int64(fs.Blocks)*fs.Bsize {
		t.Errorf("total %d, want the file system's %d", total, int64(fs.Blocks)*fs.Bsize)
	}
	if _, err := (controllerServer{Driver: d}).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "ws"}); err != nil {
		t.Fatal(err)
	}
}

// TestProjectQuotaExt4 makes an ext4 image with project quotas, mounts it
// with prjquota and makes a volume of 1 MiB on it: a write of 2 MiB into
// the volume's directory is EDQUOT, the volume's total is the quota, and
// DeleteVolume takes the limit away.
func TestProjectQuotaExt4(t *testing.T) {
	mnt := mountQuotaExt4(t)
	d, err := New(Config{
		NodeID: "n", BaseDir: filepath.Join(mnt, "base"), StateDir: filepath.Join(t.TempDir(), "state"),
		Realmfs: "/nonexistent/realmfs", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !d.quota {
		t.Fatalf("ext4 mounted with prjquota: no project quota found (%v)", projectQuotaEnforced(filepath.Join(d.cfg.BaseDir, volumesDir)))
	}
	ctx, cs := context.Background(), controllerServer{Driver: d}
	for range 2 { // the second is the idempotent retry: the same again
		if _, err := cs.CreateVolume(ctx, capacityReq("ws", 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	dir := d.volumeDir("ws")
	r, err := d.readRecord("ws")
	if err != nil || r.ProjectID != projectIDBase {
		t.Fatalf("record %+v, %v: want project %d", r, err, projectIDBase)
	}
	if id, inherit, err := projectOf(dir); err != nil || id != projectIDBase || !inherit {
		t.Fatalf("the directory's project: %d, inherit %v, %v", id, inherit, err)
	}
	writeAsNobody(t, filepath.Join(dir, "big"), 2<<20)
	st, err := (nodeServer{Driver: d}).NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "ws", VolumePath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if u := st.Usage[0]; u.Total != 1<<20 || u.Used <= 0 || u.Used > 1<<20 {
		t.Errorf("usage %+v: want the total 1 MiB and the file's bytes used", u)
	}
	if _, err := cs.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "ws"}); err != nil {
		t.Fatal(err)
	}
	if limit, _, err := projectUsage(filepath.Join(d.cfg.BaseDir, volumesDir), projectIDBase); err != nil || limit != 0 {
		t.Errorf("after DeleteVolume the project's limit is %d (%v), want none", limit, err)
	}
}

// writeAsNobody writes n bytes to path as uid 65534 and wants EDQUOT: root
// is not held to a hard limit on ext4 (CAP_SYS_RESOURCE passes it).
func writeAsNobody(t *testing.T, path string, n int) {
	t.Helper()
	cmd := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=64k", "count="+strconv.Itoa(n/(64<<10)), "conv=fsync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Disk quota exceeded") {
		t.Fatalf("dd of %d bytes into a 1 MiB volume: %v, %s; want EDQUOT", n, err, out)
	}
}

// mountQuotaExt4 makes a 64 MiB ext4 image with the quota and project
// features in a temp dir, attaches it to a loop device and mounts it with
// prjquota; at the test's end it is unmounted and the loop device
// detached. Without root, a loop device or mkfs.ext4 the test is skipped,
// and fails in CI. A kernel without ext4 quota support (CONFIG_QFMT_V2,
// as /proc/config.gz tells) is a skip in CI too: it is the kernel's.
func mountQuotaExt4(t *testing.T) string {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/loop-control"); err != nil {
		why = "no loop devices"
	} else if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		why = "no mkfs.ext4"
	} else if _, err := exec.LookPath("losetup"); err != nil {
		why = "no losetup"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test mounts an ext4 image with project quotas and CI must be able to: %s", why)
		}
		t.Skipf("this test mounts an ext4 image with project quotas: %s", why)
	}
	if kernelLacks("CONFIG_QFMT_V2") {
		t.Skip("the kernel has no ext4 quota support (CONFIG_QFMT_V2 is not set): ext4 with the quota feature does not mount")
	}
	tmp := t.TempDir()
	for _, dir := range []string{filepath.Dir(tmp), tmp} { // 0700: uid 65534 writes in it
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, mnt := filepath.Join(tmp, "ext4.img"), filepath.Join(tmp, "mnt")
	run(t, "mkfs.ext4", "-q", "-O", "quota,project", img, "64M")
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", img))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, "ext4", 0, "prjquota"); err != nil {
		t.Fatalf("mount %s on %s with prjquota: %v", dev, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt
}

// kernelLacks reports whether /proc/config.gz says option is not set; false
// where there is no config to read.
func kernelLacks(option string) bool {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return false
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return false
	}
	config, err := io.ReadAll(z)
	if err != nil {
		return false
	}
	return !bytes.Contains(config, []byte("\n"+option+"=y\n"))
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
