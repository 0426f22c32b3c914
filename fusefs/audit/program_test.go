package audit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// TestReadProgramLive: the program of a live process (this test's) is its
// comm, the executable's name cut to the kernel's 15 bytes, and the target
// of its exe link.
func TestReadProgramLive(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	comm := filepath.Base(exe)
	if len(comm) > 15 {
		comm = comm[:15]
	}
	gotComm, gotExe := readProgram("/proc", uint32(os.Getpid()))
	if gotComm != comm || gotExe != exe {
		t.Errorf("readProgram(self) = %q, %q; want %q, %q", gotComm, gotExe, comm, exe)
	}
}

// TestReadProgramGone: a process that has exited (and been reaped) has no
// program: empty fields, not an error; nor has pid 0.
func TestReadProgramGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if comm, exe := readProgram("/proc", uint32(cmd.Process.Pid)); comm != "" || exe != "" {
		t.Errorf("readProgram of a reaped pid = %q, %q; want empty", comm, exe)
	}
	if comm, exe := readProgram("/proc", 0); comm != "" || exe != "" {
		t.Errorf("readProgram(0) = %q, %q; want empty", comm, exe)
	}
}

// TestAuditProgramReadOncePerLine: the first refusal of a kind reads the
// caller's program; repeats coalesced into its window do not read it
// again, and their line carries the first one's.
func TestAuditProgramReadOncePerLine(t *testing.T) {
	proc := t.TempDir()
	setProgram := fakeProgram(t, proc)
	setProgram("7", "cat", "/usr/bin/cat")
	var buf syncBuffer
	clk := newFakeClock()
	a := New(&buf, clk.now, time.Second)
	a.proc = proc
	a.RecordRefusal(ctxPid(7), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES, "**/.env", "built-in: x")
	setProgram("7", "changed", "/changed")
	a.RecordRefusal(ctxPid(7), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES, "**/.env", "built-in: x")
	a.RecordRefusal(ctxPid(7), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES, "**/.env", "built-in: x")
	a.RecordRefusal(ctxPid(7), "readlink", "l", errcode.PathEscape, syscall.EACCES, "escape:symlink-target", "")
	os.RemoveAll(filepath.Join(proc, "7")) // gone
	a.RecordRefusal(ctxPid(7), "open", "x.pem", errcode.CredentialPathDenied, syscall.EACCES, "**/*.pem", "built-in: y")
	a.Close()
	lines := auditLines(t, buf.bytes())
	var got []string
	for _, l := range lines {
		got = append(got, strings.Join([]string{l["op"].(string), l["comm"].(string), l["exe"].(string), str(l["rule"]), str(l["ruleSource"]), jsonNum(l["repeat"])}, " "))
	}
	want := []string{
		"open cat /usr/bin/cat **/.env built-in: x null",
		"open cat /usr/bin/cat **/.env built-in: x 2",
		"readlink changed /changed escape:symlink-target  null",
		"open   **/*.pem built-in: y null",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAuditCoalescesPerProgram: the same refusal by another program within
// the window is a line of its own (cat, then cp, of .env); by another
// process of the same program (a loop that runs cat again) a repeat.
func TestAuditCoalescesPerProgram(t *testing.T) {
	proc := t.TempDir()
	setProgram := fakeProgram(t, proc)
	for _, p := range []struct{ pid, comm, exe string }{
		{"7", "cat", "/usr/bin/cat"}, {"8", "cat", "/usr/bin/cat"}, {"11", "cat", "/usr/bin/cat"},
		{"9", "cp", "/usr/bin/cp"}, {"10", "cat", "/usr/bin/cat"},
	} {
		setProgram(p.pid, p.comm, p.exe)
	}
	var buf syncBuffer
	clk := newFakeClock()
	a := New(&buf, clk.now, time.Second)
	a.proc = proc
	for _, pid := range []uint32{7, 8, 11, 9, 10} {
		a.RecordRefusal(ctxPid(pid), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES, "**/.env", "built-in: x")
	}
	a.Close()
	var got []string
	for _, l := range auditLines(t, buf.bytes()) {
		got = append(got, strings.Join([]string{l["comm"].(string), jsonNum(l["repeat"])}, " "))
	}
	want := []string{"cat null", "cat 2", "cp null", "cat null"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fakeProgram returns a function that makes (or changes) process pid under
// proc: its comm and its exe link.
func fakeProgram(t *testing.T, proc string) func(pid, comm, exe string) {
	return func(pid, comm, exe string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "exe"))
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestContainerOf: the container id is read from the cgroup paths Podman,
// Docker and containerd make, systemd's and cgroupfs'; others have none.
func TestContainerOf(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, tt := range []struct{ owner, want string }{
		{"cgroup:/machine.slice/libpod-" + id + ".scope", id},
		{"cgroup:/machine.slice/libpod-" + id + ".scope/container", id},
		{"cgroup:/system.slice/docker-" + id + ".scope", id},
		{"cgroup:/docker/" + id, id},
		{"cgroup:/libpod_parent/libpod-" + id, id},
		{"cgroup:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-" + id + ".scope", id},
		{"cgroup:/user.slice/user-1000.slice/session-3.scope", ""},
		{"cgroup:/machine.slice/libpod-" + id[:63] + ".scope", ""},
		{"session:42", ""},
		{"pid:7", ""},
		{"", ""},
	} {
		if got := containerOf(tt.owner); got != tt.want {
			t.Errorf("containerOf(%q) = %q, want %q", tt.owner, got, tt.want)
		}
	}
}
