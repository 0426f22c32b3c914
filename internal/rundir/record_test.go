package rundir

import (
	"os"
	"os/exec"
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
	path := filepath.Join("/run/realmfs", recordName(dev, os.Getpid()))
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

// fakeDaemon starts a process whose name is a realmfs's (a copy of sleep
// named realmfs-sleep), for isRealmfs, and returns its pid.
func fakeDaemon(t *testing.T) int {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "realmfs-sleep")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestRecordOfTheNextMountOfADevice: a daemon that ends after another
// mount took its device's number removes its own record only, never the
// newcomer's (under MAJOR:MINOR.json alone it did: realmfs audit MOUNTPOINT
// then found no record of a live mount); a newcomer removes the records a
// killed daemon left, and the name older daemons wrote.
func TestRecordOfTheNextMountOfADevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("records of root's daemons are in /run/realmfs: as root only")
	}
	dev := unix.Mkdev(0, 1<<19-5) // no mount has it
	dir := "/run/realmfs"
	old, next := fakeDaemon(t), fakeDaemon(t)
	removeOld, err := WriteRecord(dev, Record{Pid: old, Backing: "/b", Mountpoint: "/m1"})
	if err != nil {
		t.Fatal(err)
	}
	defer removeOld()
	removeNext, err := WriteRecord(dev, Record{Pid: next, Backing: "/b", Mountpoint: "/m2"})
	if err != nil {
		t.Fatal(err)
	}
	defer removeNext()
	if rec, err := readRecord(dev, "/m1"); err != nil || rec.Pid != old {
		t.Errorf("the ending daemon's record: %+v, %v", rec, err)
	}
	removeOld() // the first daemon ends, after the second mounted
	if rec, err := readRecord(dev, "/m2"); err != nil || rec.Pid != next {
		t.Errorf("after the first daemon ended, the live mount's record: %+v, %v", rec, err)
	}

	// A killed daemon's record (its pid no realmfs) and an older daemon's
	// name are removed by the next daemon of the device.
	gone := filepath.Join(dir, recordName(dev, 1<<22+7))
	older := filepath.Join(dir, devName(dev)+".json")
	for _, p := range []string{gone, older} {
		if err := os.WriteFile(p, []byte(`{"pid":4194311,"mountpoint":"/m0"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
	}
	removeThird, err := WriteRecord(dev, Record{Pid: os.Getpid(), Backing: "/b", Mountpoint: "/m3"})
	if err != nil {
		t.Fatal(err)
	}
	defer removeThird()
	for _, p := range []string{gone, older} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v), want it removed by the next daemon", p, err)
		}
	}
	if rec, err := readRecord(dev, "/m2"); err != nil || rec.Pid != next {
		t.Errorf("a live daemon's record was removed by the next: %+v, %v", rec, err)
	}
}
