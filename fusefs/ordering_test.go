package fusefs

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExt4OrdersRenames: only the two options that break ext4's ordering
// of a renamed file's data before the rename turn the fsync back on.
func TestExt4OrdersRenames(t *testing.T) {
	for _, tc := range []struct {
		opts string
		want bool
	}{
		{"rw", true},
		{"rw,errors=remount-ro", true},
		{"rw,data=journal", true},
		{"rw,nodelalloc", true},
		{"rw,noauto_da_alloc", false},
		{"rw,errors=remount-ro,data=writeback", false},
		{"", true},
	} {
		if got := ext4OrdersRenames(tc.opts); got != tc.want {
			t.Errorf("ext4OrdersRenames(%q) = %v, want %v", tc.opts, got, tc.want)
		}
	}
}

// TestOrdersRenamedData tells ext4 from the rest on this machine's real
// filesystems: tmpfs (/dev/shm) never orders; an ext4 test dir does unless
// one of its mounts was made without the ordering.
func TestOrdersRenamedData(t *testing.T) {
	for _, dir := range []string{"/dev/shm", t.TempDir()} {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			t.Fatal(err)
		}
		got := ordersRenamedData(fd)
		unix.Close(fd)
		switch sfs.Type {
		case unix.EXT4_SUPER_MAGIC:
			mi, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			unordered := strings.Contains(string(mi), "noauto_da_alloc") || strings.Contains(string(mi), "data=writeback")
			if !got && !unordered {
				t.Errorf("%s (ext4, default ordering): ordersRenamedData = false, want true", dir)
			}
		default:
			if got {
				t.Errorf("%s (filesystem %#x): ordersRenamedData = true, want false", dir, sfs.Type)
			}
		}
	}
}
