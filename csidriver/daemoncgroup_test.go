package csidriver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		fails            bool
	}{
		{"cgroup2 only", "0::/kubepods/pod1/ctr\n", "/kubepods/pod1/ctr", false},
		{"hybrid", "9:name=systemd:/x\n4:memory:/x\n0::/libpod_parent/libpod-1\n", "/libpod_parent/libpod-1", false},
		{"root", "0::/\n", "/", false},
		{"cgroup v1 only", "4:memory:/x\n1:cpu:/x\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unifiedCgroup(tc.text)
			if (err != nil) != tc.fails || got != tc.want {
				t.Fatalf("unifiedCgroup(%q) = %q, %v; want %q, fails %v", tc.text, got, err, tc.want, tc.fails)
			}
		})
	}
}

// TestInsideOwnCgroup: a daemon cgroup dir inside the plugin's own cgroup
// (it would die with the plugin's container) is told apart from one beside
// it, through the cgroup2 mount's root and the plugin's cgroup path.
func TestInsideOwnCgroup(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		dir, mount, root, own string
		ownIsRoot             bool
		inside                bool
	}{
		{"host cgroupns, beside the pod", "/sys/fs/cgroup/realm-csi", "/sys/fs/cgroup", "/", "/kubepods/podA/ctr", false, false},
		{"host cgroupns, under the container", "/sys/fs/cgroup/kubepods/podA/ctr/realm-csi", "/sys/fs/cgroup", "/", "/kubepods/podA/ctr", false, true},
		{"the container's cgroup itself", "/sys/fs/cgroup/kubepods/podA/ctr", "/sys/fs/cgroup", "/", "/kubepods/podA/ctr", false, true},
		{"a sibling with the same prefix", "/sys/fs/cgroup/kubepods/podA/ctr2", "/sys/fs/cgroup", "/", "/kubepods/podA/ctr", false, false},
		{"hybrid host, unified mount", "/sys/fs/cgroup/unified/realm-csi", "/sys/fs/cgroup/unified", "/", "/libpod_parent/libpod-1", false, false},
		{"private cgroupns: the mount shows only the container", "/sys/fs/cgroup/realm-csi", "/sys/fs/cgroup", "/", "/", false, true},
		{"the hierarchy's root: a plugin on the host", "/sys/fs/cgroup/realm-csi", "/sys/fs/cgroup", "/", "/", true, false},
		{"a mount of a sub-tree holding the plugin", "/mnt/cg/ctr/x", "/mnt/cg", "/kubepods", "/kubepods/ctr", false, true},
		{"the plugin outside the mounted sub-tree", "/mnt/cg/realm-csi", "/mnt/cg", "/realm", "/kubepods/ctr", false, false},
		// The host's tree seen from a cgroup namespace of the plugin's own:
		// its path is not known by name (cgroupDir says so; holdingSelf
		// finds it instead).
		{"private cgroupns, the host's tree mounted", "/sys/fs/cgroup/kubepods/podA/ctr/x", "/sys/fs/cgroup", "/../../..", "/", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ownDir, ok := cgroupDir(tc.mount, tc.root, tc.own)
			if got := ok && insideOwn(tc.dir, ownDir, tc.ownIsRoot); got != tc.inside {
				t.Fatalf("%s inside %s (mount %s of %s): %v, want %v", tc.dir, tc.own, tc.mount, tc.root, got, tc.inside)
			}
		})
	}
}

func TestCgroupName(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"pvc-1", true},
		{"csi-0f3a_b", true},
		{"", false},
		{"..", false},
		{"../escape", false},
		{"a/b", false},
		{"cgroup.procs", false},
		{"memory.max", false},
		{"-leading", false},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			got, err := cgroupName(tc.id)
			if (err == nil) != tc.ok || (tc.ok && got != tc.id) {
				t.Fatalf("cgroupName(%q) = %q, %v; want ok %v", tc.id, got, err, tc.ok)
			}
		})
	}
}

// TestHoldingSelf finds the cgroup of this process on a path through the
// cgroup.procs files of a fake tree.
func TestHoldingSelf(t *testing.T) {
	mnt := t.TempDir()
	own := filepath.Join(mnt, "kubepods", "ctr")
	for dir, procs := range map[string]string{mnt: "1\n", filepath.Join(mnt, "kubepods"): "", own: "7\n" + strconv.Itoa(os.Getpid()) + "\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(own, "realm-csi", "pvc-1"), own},
		{own, own},
		{filepath.Join(mnt, "realm-csi"), ""},
		{filepath.Join(mnt, "kubepods", "ctr2"), ""},
	} {
		if got := holdingSelf(tc.dir, mnt); got != tc.want {
			t.Errorf("holdingSelf(%s) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}
