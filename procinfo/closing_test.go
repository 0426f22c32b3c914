package procinfo

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tempFile makes a one-byte file and returns its name and stat.
func tempFile(t *testing.T) (string, unix.Stat_t) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return name, st
}

func TestDescriptorsCountsThisInode(t *testing.T) {
	name, st := tempFile(t)
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	tid := uint32(unix.Gettid())
	count := func() Closing {
		t.Helper()
		c, err := r.Descriptors(tid, []uint64{st.Ino}, st.Dev, SameOpen{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count(); c.Others != 0 || c.Exiting {
		t.Fatalf("before open: %+v, want no descriptors and not exiting", c)
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if c := count(); c.Others != 1 {
		t.Fatalf("one descriptor: %+v", c)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	if c := count(); c.Others != 2 {
		t.Fatalf("after dup: %+v", c)
	}
	unix.Close(dup)
	if c := count(); c.Others != 1 {
		t.Fatalf("after closing the dup: %+v", c)
	}
	// The same inode number on another device is another file.
	if c, err := r.Descriptors(tid, []uint64{st.Ino}, st.Dev+1, SameOpen{}); err != nil || c.Others != 0 {
		t.Fatalf("another device: %+v, %v; want no descriptors", c, err)
	}
}

func TestDescriptorsOfAVanishedThread(t *testing.T) {
	r := NewResolver(OwnerPID, t.TempDir()) // no such thread beneath it
	if _, err := r.Descriptors(4242, []uint64{1}, 0, SameOpen{}); err == nil {
		t.Fatal("want an error for a thread that is not there")
	}
}

func TestFdinfoFields(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ino, mnt uint64
		flags    uint32
	}{
		{"pos:\t0\nflags:\t0100002\nmnt_id:\t31\nino:\t1234\n", 1234, 31, 0100002},
		{"pos:\t0\nflags:\t02\nmnt_id:\t31\n", 0, 31, 02},
		{"ino:\t18446744073709551615\n", 1<<64 - 1, 0, 0},
		{"ino:\tbogus\n", 0, 0, 0},
		{"", 0, 0, 0},
	} {
		if ino, mnt, fl := fdinfoFields([]byte(tc.in)); ino != tc.ino || mnt != tc.mnt || fl != tc.flags {
			t.Errorf("fdinfoFields(%q) = %d, %d, %o; want %d, %d, %o", tc.in, ino, mnt, fl, tc.ino, tc.mnt, tc.flags)
		}
	}
}

func TestParseMountDevices(t *testing.T) {
	in := "22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n" +
		"61 29 0:52 / /tmp/x/mnt rw,nosuid,nodev,relatime - fuse.realmfs /tmp/x/b rw,user_id=0\n" +
		"bogus line\n29 1 254:1 / / rw - ext4 /dev/vda rw\n"
	got := parseMountDevices([]byte(in))
	want := map[uint64]uint64{22: unix.Mkdev(0, 21), 61: unix.Mkdev(0, 52), 29: unix.Mkdev(254, 1)}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, dev := range want {
		if got[id] != dev {
			t.Errorf("mount %d: dev %#x, want %#x", id, got[id], dev)
		}
	}
}

func TestStatExitCode(t *testing.T) {
	// A stat line of 52 fields; exit_code is the last.
	line := func(comm string, code string) string {
		f := make([]string, 50) // fields 3..52
		for i := range f {
			f[i] = "0"
		}
		f[0] = "R"
		f[len(f)-1] = code
		return "42 (" + comm + ") " + strings.Join(f, " ") + "\n"
	}
	for _, tc := range []struct {
		name, in string
		want     int
		bad      bool
	}{
		{"normal exit 3", line("sh", "768"), 768, false},
		{"killed", line("tr", "9"), 9, false},
		{"comm with spaces and parens", line("a) (b", "15"), 15, false},
		{"short line", "42 (x) R 1 2\n", 0, true},
		{"no comm", "42 x R\n", 0, true},
		{"not a number", line("x", "nine"), 0, true},
	} {
		got, err := statExitCode([]byte(tc.in))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%s: statExitCode = %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.bad)
		}
	}
}

// TestDescriptorsOfTheSameOpen: a read descriptor of the file is not
// counted for a close of a write open (SameOpen), and a write descriptor
// without O_APPEND not for an appending one.
func TestDescriptorsOfTheSameOpen(t *testing.T) {
	name, st := tempFile(t)
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	tid := uint32(unix.Gettid())
	count := func(flags uint32) int {
		t.Helper()
		c, err := r.Descriptors(tid, []uint64{st.Ino}, st.Dev, SameOpen{Mask: unix.O_ACCMODE | unix.O_APPEND, Flags: flags})
		if err != nil {
			t.Fatal(err)
		}
		return c.Others
	}
	rd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rd)
	if c := count(unix.O_WRONLY); c != 0 {
		t.Fatalf("a read descriptor, counted for a write open: %d, want 0", c)
	}
	wr, err := unix.Open(name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wr)
	if c := count(unix.O_WRONLY); c != 1 {
		t.Fatalf("a write descriptor: %d, want 1", c)
	}
	if c := count(unix.O_WRONLY | unix.O_APPEND); c != 0 {
		t.Fatalf("a write descriptor, counted for an appending open: %d, want 0", c)
	}
	if c := count(unix.O_RDONLY); c != 1 {
		t.Fatalf("a read descriptor, for a read open: %d, want 1", c)
	}
}

// TestDescriptorsOfAnotherProcessCached: scans of another process's table
// read its fdinfo files through the table kept from the scan before
// (fdTable), and still see each change: a descriptor closed, another
// number opened, a number reused for another file, the process gone.
func TestDescriptorsOfAnotherProcessCached(t *testing.T) {
	dir := t.TempDir()
	name, other := filepath.Join(dir, "f"), filepath.Join(dir, "g")
	for _, n := range []string{name, other} {
		if err := os.WriteFile(n, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The child holds f as fd 3; each line on its stdin runs the next
	// step, and it answers "ok" once the step is done.
	cmd := exec.Command("sh", "-c", `read a; exec 3<&-; exec 4<"$1"; echo ok
read b; exec 4<&- 3<"$2"; echo ok
read c; exit 0`, "sh", name, other)
	cmd.ExtraFiles = []*os.File{f}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	answers := bufio.NewScanner(out)
	step := func() {
		t.Helper()
		if _, err := in.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		if !answers.Scan() || answers.Text() != "ok" {
			t.Fatalf("child: %q, %v", answers.Text(), answers.Err())
		}
	}
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	pid := uint32(cmd.Process.Pid)
	count := func(want int) {
		t.Helper()
		c, err := r.Descriptors(pid, []uint64{st.Ino}, st.Dev, SameOpen{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Others != want || c.Exiting {
			t.Fatalf("%+v, want %d descriptors of the file and not exiting", c, want)
		}
	}
	count(1) // fd 3, by name
	count(1) // fd 3, through the kept table
	step()
	count(1) // fd 3 closed, fd 4 of the file opened
	step()
	count(0) // fd 4 closed, fd 3 reused for another file
	r.tablesMu.Lock()
	kept := len(r.tables)
	r.tablesMu.Unlock()
	if kept != 1 {
		t.Fatalf("%d tables kept, want the child's", kept)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Descriptors(pid, []uint64{st.Ino}, st.Dev, SameOpen{}); err == nil {
		t.Fatal("a process that is gone: no error")
	}
}

// TestDescriptorsOfALiveThreadWithNone: a process that closed every
// descriptor and sleeps lists none, yet is not exiting. Descriptors must
// not say Exiting (which a killed writer's last close is judged by): it
// says it cannot tell.
func TestDescriptorsOfALiveThreadWithNone(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is missing (make deps installs it)")
	}
	cmd := exec.Command("python3", "-c", "import os, time; os.closerange(0, 1 << 20); time.sleep(60)")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := uint32(cmd.Process.Pid)
	// Wait until python runs with no descriptor, by its own listing.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(int(pid)) + "/fdinfo")
		if err == nil && len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("python never ran without descriptors (%d listed, %v)", len(ents), err)
		}
	}
	r := NewResolver(OwnerCgroup, "/proc")
	for range 2 { // by name, then whatever was kept
		c, err := r.Descriptors(pid, []uint64{1}, 0, SameOpen{})
		if err == nil {
			t.Fatalf("a live process with no descriptor: %+v, no error; want an error", c)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestDescriptorsUnderSignals: getdents(2) stops a listing early, with room
// left in the buffer, when a signal is pending for the reading thread
// (filldir64's signal_pending check), and the Go runtime signals its
// threads all the time (SIGURG, preemption). Only a read of zero bytes ends
// the listing: a scan that took a short read for the end missed
// descriptors, or found none at all and took a live writer for one
// without a table (seen: fsx's close deferred to the release, its reopen
// then read the old content).
func TestDescriptorsUnderSignals(t *testing.T) {
	name, st := tempFile(t)
	const open = 64
	for range open {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // keeps a signal pending on the scanning thread
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				unix.Tgkill(os.Getpid(), tid, unix.SIGURG)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	for i := range 50 {
		c, err := r.Descriptors(uint32(tid), []uint64{st.Ino}, st.Dev, SameOpen{})
		if err != nil || c.Others != open || c.Exiting {
			t.Fatalf("scan %d under signals: %+v, %v; want %d descriptors", i, c, err, open)
		}
	}
}
