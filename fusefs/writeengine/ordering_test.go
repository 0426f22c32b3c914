package writeengine

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

// TestJournalTaskNamed: a journaled ext4 names its jbd2 thread.
func TestJournalTaskNamed(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{{"1234\n", true}, {"<none>\n", false}, {"", false}} {
		if got := journalTaskNamed(tc.s); got != tc.want {
			t.Errorf("journalTaskNamed(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestOrdersRenamedData tells journaled ext4 from the rest on this
// machine's real filesystems: tmpfs (/dev/shm) never orders; an ext4 test
// dir orders exactly when it has a journal and none of its mounts was made
// without the ordering.
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
		got := OrdersRenamedData(fd)
		unix.Close(fd)
		switch sfs.Type {
		case unix.EXT4_SUPER_MAGIC:
			mi, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			unordered := strings.Contains(string(mi), "noauto_da_alloc") || strings.Contains(string(mi), "data=writeback")
			var st unix.Stat_t
			if err := unix.Stat(dir, &st); err != nil {
				t.Fatal(err)
			}
			journaled := ext4Journaled(int(unix.Major(st.Dev)), int(unix.Minor(st.Dev)))
			if journaled && !unordered && !got {
				t.Errorf("%s (journaled ext4, default ordering): OrdersRenamedData = false, want true", dir)
			}
			if !journaled && got {
				t.Errorf("%s (ext4 without a journal): OrdersRenamedData = true, want false", dir)
			}
			t.Logf("%s: ext4, journaled %v, OrdersRenamedData %v", dir, journaled, got)
		default:
			if got {
				t.Errorf("%s (filesystem %#x): OrdersRenamedData = true, want false", dir, sfs.Type)
			}
		}
	}
}
