package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRecordOfAGoneDaemon: a record whose pid is no realmfs, or whose
// mountpoint is another's, is refused as left behind.
func TestRecordOfAGoneDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("records of root's daemons are in /run/realmfs: as root only")
	}
	dev := unix.Mkdev(0, 1<<19-3) // no mount has it
	remove, err := WriteRecord(dev, Record{Pid: os.Getpid(), Backing: "/b", Mountpoint: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	path := filepath.Join("/run/realmfs", recordName(dev))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("record %s: %v %v", path, st, err)
	}
	for _, mnt := range []string{"/m", "/other"} {
		_, err := readRecord(dev, mnt)
		if err == nil || !strings.Contains(err.Error(), "a daemon gone") {
			t.Errorf("readRecord(%s) = %v, want a record left by a daemon gone (the test binary is no realmfs)", mnt, err)
		}
	}
	remove()
	if _, err := readRecord(dev, "/m"); err == nil || !strings.Contains(err.Error(), "no record") {
		t.Errorf("after remove: %v, want no record", err)
	}
}
