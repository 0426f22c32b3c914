package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon as operators run it: signals, logs, -o forms of every file
// flag (fstab, systemd .mount units), readiness, refused mountpoints.

// waitForLine polls path until a line contains every word of want (the
// daemon writes the line; the test has no other event to wait on), and
// returns it.
func waitForLine(tb testing.TB, path string, want ...string) string {
	tb.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		b, _ := os.ReadFile(path)
		for line := range strings.SplitSeq(string(b), "\n") {
			if containsEvery(line, want) {
				return line
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s has no line with %q; it holds:\n%s", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jsonRecords parses a JSON-lines daemon log.
func jsonRecords(tb testing.TB, path string) []map[string]any {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			tb.Errorf("daemon log line is not JSON: %q: %v", sc.Text(), err)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// TestSIGHUPReopensLogs: logrotate moves the audit log and the daemon log
// away and sends SIGHUP (postrotate). The mount stays, and the next lines
// go to new files under the old names.
func TestSIGHUPReopensLogs(t *testing.T) {
	t.Parallel()
	var daemonLog string
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "TOKEN=s3cret\n")
		daemonLog = filepath.Join(filepath.Dir(m.AuditLog), "daemon.log")
		m.cfg.flags = append(m.cfg.flags, "--log", daemonLog)
	}))
	if _, err := os.ReadFile(m.Path(".env")); err == nil {
		t.Fatal("read .env through the mount")
	}
	m.WaitRefusal("", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	waitForLine(t, daemonLog, "mounted")
	for _, p := range []string{m.AuditLog, daemonLog} {
		if err := os.Rename(p, p+".1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(m.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForLine(t, daemonLog, "logs reopened")
	if !m.Mounted() {
		t.Fatal("SIGHUP unmounted the mount")
	}
	writeFile(t, m.Path("after-hup.txt"), "still here\n")
	if got := readFile(t, m.BackingPath("after-hup.txt")); got != "still here\n" {
		t.Errorf("after-hup.txt in BACKING = %q", got)
	}
	if _, err := os.ReadFile(m.Path(".env")); err == nil {
		t.Fatal("read .env through the mount after SIGHUP")
	}
	m.WaitRefusal("", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	if old := readFile(t, m.AuditLog+".1"); strings.Count(old, "\n") != 1 {
		t.Errorf("the rotated audit log got lines after SIGHUP:\n%s", old)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("unmount after SIGHUP: %v", err)
	}
	waitForLine(t, daemonLog, "unmounted")
}

// TestOptionsConfigureTheGuard: -o policy=, audit_log=, log= and
// log_format= do what their flags do, through mount.fuse3 as an fstab line
// or a systemd .mount unit runs realmfs (no flags can be passed that way).
func TestOptionsConfigureTheGuard(t *testing.T) {
	requireTool(t, "mount.fuse3")
	t.Parallel()
	var daemonLog string
	m := mount(t, ViaMountFuse3(), Prepare(func(m *Mount) {
		state := filepath.Dir(m.AuditLog)
		pol := filepath.Join(state, "policy.yaml")
		writeFile(t, pol, "version: 1\ncredentials:\n  deny: [\"**/*.secret\"]\n")
		daemonLog = filepath.Join(state, "daemon.jsonl")
		writeFile(t, m.BackingPath("plans.secret"), "launch codes\n")
		writeFile(t, m.BackingPath("plans.txt"), "public\n")
		m.cfg.opts = append(m.cfg.opts, "policy="+pol, "audit_log="+m.AuditLog, "log="+daemonLog, "log_format=json")
	}))
	if _, err := os.ReadFile(m.Path("plans.secret")); err == nil {
		t.Error("read plans.secret, denied by the -o policy= file")
	}
	m.WaitRefusal("", "plans.secret", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	if got := readFile(t, m.Path("plans.txt")); got != "public\n" {
		t.Errorf("plans.txt = %q", got)
	}
	waitForLine(t, daemonLog, `"mounted"`)
	var mounted map[string]any
	for _, rec := range jsonRecords(t, daemonLog) {
		if rec["msg"] == "mounted" {
			mounted = rec
		}
	}
	if mounted == nil || mounted["level"] != "INFO" || mounted["mountpoint"] != m.Dir || !strings.HasSuffix(mounted["policy"].(string), "policy.yaml") {
		t.Errorf("mounted record = %v, want level INFO, mountpoint %s and the -o policy file", mounted, m.Dir)
	}
}

// TestMountFromFstab mounts as mount(8) does for an /etc/fstab line (a
// private fstab given with mount -T), with the guard configured by -o
// policy=: the line an operator writes.
func TestMountFromFstab(t *testing.T) {
	requireTool(t, "mount.fuse3", "mount", "umount")
	m := newMount(t, nil)
	state := filepath.Dir(m.AuditLog)
	pol := filepath.Join(state, "policy.yaml")
	writeFile(t, pol, "version: 1\ncredentials:\n  deny: [\"**/*.secret\"]\n")
	writeFile(t, m.BackingPath("plans.secret"), "launch codes\n")
	daemonLog := filepath.Join(state, "daemon.log")
	fstab := filepath.Join(state, "fstab")
	// mount(8) runs helpers with a PATH of its own, so the line names the
	// binary under test as mount.fuse3's "PROGRAM#SOURCE" (an installed
	// realmfs is on that PATH, and "BACKING MNT fuse.realmfs" does).
	writeFile(t, fstab, "# a guarded workspace\n"+strings.Join([]string{realmfsBin + "#" + m.Backing, m.Dir, "fuse",
		"nofail,policy=" + pol + ",audit_log=" + m.AuditLog + ",log=" + daemonLog, "0", "0"}, " ")+"\n")
	if out, err := exec.Command("mount", "-T", fstab, m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -T %s %s: %v\n%s", fstab, m.Dir, err, out)
	}
	t.Cleanup(func() {
		if m.Mounted() {
			exec.Command("umount", "-l", m.Dir).Run()
		}
	})
	if !m.Mounted() {
		t.Fatal("mount -T returned, but nothing is mounted")
	}
	if _, err := os.ReadFile(m.Path("plans.secret")); err == nil {
		t.Error("read plans.secret, denied by the fstab line's policy=")
	}
	m.WaitRefusal("", "plans.secret", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	if out, err := exec.Command("umount", m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	waitForLine(t, daemonLog, "unmounted")
}

// TestReadiness: under systemd (Type=notify, NOTIFY_SOCKET set) the daemon
// says READY=1 once the mount serves, and STOPPING=1 when a signal stops it.
func TestReadiness(t *testing.T) {
	t.Parallel()
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := mount(t, Binary(realmfsBin, "NOTIFY_SOCKET="+sock))
	read := func() string {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 512)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification from the daemon: %v", err)
		}
		return string(buf[:n])
	}
	if got := read(); got != "READY=1" {
		t.Errorf("first notification %q, want READY=1", got)
	}
	if !m.Mounted() {
		t.Error("READY=1 before the mount is there")
	}
	if err := m.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	if got := read(); got != "STOPPING=1" {
		t.Errorf("notification at SIGTERM %q, want STOPPING=1", got)
	}
}

// TestMountpointRefused: BACKING itself, a directory inside it, a directory
// that is already a mount and a non-empty one are refused with a reason
// (exit 2) and nothing is mounted; -o nonempty mounts over a non-empty one.
func TestMountpointRefused(t *testing.T) {
	m := mount(t)
	inside := m.BackingPath("sub")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	full := t.TempDir()
	writeFile(t, filepath.Join(full, "keep.txt"), "mine\n")
	for _, tc := range []struct {
		name, backing, mnt, want string
	}{
		{"BACKING itself", m.Backing, m.Backing, "is the backing directory"},
		{"inside BACKING", m.Backing, inside, "inside the backing directory"},
		{"already a mount", other, m.Dir, "already a mount point"},
		{"not empty", other, full, "not empty"},
	} {
		for _, detach := range []bool{false, true} {
			args := []string{tc.backing, tc.mnt}
			if !detach {
				args = append([]string{"-f"}, args...)
			}
			code, out := startRaw(t, tc.mnt, nil, 15*time.Second, args...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("%s (%v): exit %d, output %q; want exit 2 and %q", tc.name, args, code, out, tc.want)
			}
		}
	}
	over := mount(t, Opts("nonempty"), Prepare(func(m *Mount) {
		writeFile(t, filepath.Join(m.Dir, "hidden-while-mounted"), "x")
		writeFile(t, m.BackingPath("served.txt"), "served\n")
	}))
	if got := readFile(t, over.Path("served.txt")); got != "served\n" {
		t.Errorf("-o nonempty mount serves served.txt = %q", got)
	}
	if err := over.Unmount(); err != nil {
		t.Error(err)
	}
	if got := readFile(t, filepath.Join(over.Dir, "hidden-while-mounted")); got != "x" {
		t.Errorf("the mountpoint's own file after unmount = %q", got)
	}
}
