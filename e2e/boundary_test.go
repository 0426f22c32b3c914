package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BACKING is the boundary (issue 19): what the host mounts inside it, and a
// directory the host moves out of it, are not reachable through the mount;
// and one lock owner cannot take every descriptor the daemon has.

// bindMount bind-mounts src onto dst (both outside the FUSE mount) until the
// test ends.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("mount --bind %s %s: %v", src, dst, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", dst, err)
		}
	})
}

// TestBindMountsInsideBackingAreRefused: a directory from outside BACKING
// bind-mounted onto b/bm, and a credential file bind-mounted onto
// b/innocent.txt (a bind of a file, on the same filesystem, so st_dev is
// the same), are refused through the mount, EACCES and PATH_ESCAPE, and
// nothing of theirs is read.
func TestBindMountsInsideBackingAreRefused(t *testing.T) {
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, filepath.Join(m.Outside, "dir", "data"), "OUTSIDE-DATA\n")
		writeFile(t, filepath.Join(m.Outside, "id_rsa"), "SECRET-KEY\n")
		writeFile(t, m.BackingPath("innocent.txt"), "innocent\n")
		writeFile(t, m.BackingPath("plain"), "plain\n")
		if err := os.Mkdir(m.BackingPath("bm"), 0o755); err != nil {
			t.Fatal(err)
		}
	}))
	// The host binds after the mount started, as it would.
	bindMount(t, filepath.Join(m.Outside, "dir"), m.BackingPath("bm"))
	bindMount(t, filepath.Join(m.Outside, "id_rsa"), m.BackingPath("innocent.txt"))

	if b, err := os.ReadFile(m.Path("bm", "data")); err == nil || strings.Contains(string(b), "OUTSIDE") {
		t.Errorf("read of bm/data through a bind mount of an outside dir: %q, %v; want EACCES", b, err)
	}
	_, err := os.ReadDir(m.Path("bm"))
	wantErrno(t, err, syscall.EACCES, "listing bm (a bind mount)")
	err = os.WriteFile(m.Path("bm", "new"), []byte("x"), 0o644)
	wantErrno(t, err, syscall.EACCES, "creating bm/new")
	assertAbsent(t, filepath.Join(m.Outside, "dir", "new"))

	b, err := os.ReadFile(m.Path("innocent.txt"))
	if strings.Contains(string(b), "SECRET") {
		t.Errorf("a credential bind-mounted as innocent.txt was read through the mount: %q", b)
	}
	wantErrno(t, err, syscall.EACCES, "reading innocent.txt (a file bind mount)")
	if _, err := os.Lstat(m.Path("innocent.txt")); errnoOf(err) != syscall.EACCES {
		t.Errorf("stat of innocent.txt (a file bind mount): %v, want EACCES (its size and mode are the credential's)", err)
	}

	m.WaitRefusal("", "bm", "PATH_ESCAPE", syscall.EACCES)
	checkAuditFields(t, m.WaitRefusal("", "innocent.txt", "PATH_ESCAPE", syscall.EACCES))
	// The rest of the workspace works as before.
	if got := readFile(t, m.Path("plain")); got != "plain\n" {
		t.Errorf("plain: %q", got)
	}
	names := run(t, m.Dir, nil, "ls")
	if !strings.Contains(names, "bm") || !strings.Contains(names, "plain") {
		t.Errorf("ls of the root: %q, want the names listed (the mount points are refused when used)", names)
	}
}

// TestDirMovedOutOfBackingIsGone: a shell whose working directory is m/mv1
// (the daemon holds an fd of mv1) cannot read or create files there once
// the host has moved b/mv1 out of BACKING; nothing is created outside, and
// the refusal is audited. The shell and the test take turns through FIFOs.
func TestDirMovedOutOfBackingIsGone(t *testing.T) {
	requireTool(t, "sh", "cat", "ls")
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("mv1", "f"), "INSIDE\n")
		writeFile(t, m.BackingPath("mv1", "sub", "h"), "SUB\n")
	}))
	ready, goOn := filepath.Join(m.Root, "ready"), filepath.Join(m.Root, "go")
	for _, p := range []string{ready, goOn} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// ls makes the daemon open (and hold) mv1's fd, and sub's, before
	// the move.
	script := `cd "$1/mv1" || exit 9
ls . sub >/dev/null || exit 8
echo ready > "$2"
read x < "$3"
cat f; echo "cat=$?"
echo x > g; echo "create=$?"
cat sub/h; echo "sub=$?"
ls; echo "ls=$?"`
	cmd := exec.Command("sh", "-c", script, "sh", m.Dir, ready, goOn)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	p := startProc(t, cmd, false)

	r, err := os.OpenFile(ready, os.O_RDONLY, 0) // blocks until the shell is in mv1
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, _ := r.Read(buf)
	r.Close()
	if strings.TrimSpace(string(buf[:n])) != "ready" {
		p.wait()
		t.Fatalf("shell did not get ready: %q\n%s", buf[:n], out.String())
	}
	if err := os.Rename(m.BackingPath("mv1"), filepath.Join(m.Outside, "mv1")); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(goOn, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "go")
	w.Close()
	done := make(chan error, 1)
	go func() { done <- p.wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("shell did not finish:\n%s", out.String())
	}
	got := out.String()
	t.Logf("shell in the moved directory:\n%s", got)
	for _, bad := range []string{"INSIDE", "SUB", "cat=0", "create=0", "sub=0", "ls=0"} {
		if strings.Contains(got, bad) {
			t.Errorf("the moved directory was still reachable through the mount (%q in the output)", bad)
		}
	}
	if _, err := os.Lstat(filepath.Join(m.Outside, "mv1", "g")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was created outside BACKING through the mount: %v", err)
	}
	e := m.WaitAudit("PATH_ESCAPE under mv1", func(e auditEntry) bool {
		return e.str("code") == "PATH_ESCAPE" && strings.HasPrefix(e.path(), "mv1")
	})
	checkAuditFields(t, e)
	// Moved back, it is the workspace's again.
	if err := os.Rename(filepath.Join(m.Outside, "mv1"), m.BackingPath("mv1")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m.Path("mv1", "f")); got != "INSIDE\n" {
		t.Errorf("mv1/f after moving mv1 back: %q", got)
	}
}

// TestDescriptorCapPerOwner: with max_fds_per_owner=50, one owner (a
// process, under lockowner=pid) holding files open gets EMFILE past 50
// opens, audited once for the burst as RESOURCE_LIMIT, while another owner
// still opens files; once the first closes them, it opens again.
func TestDescriptorCapPerOwner(t *testing.T) {
	requireTool(t, "python3")
	const capN, tries = 50, 60
	m := mount(t, Opts("lockowner=pid", "max_fds_per_owner="+strconv.Itoa(capN)), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "content\n")
		writeFile(t, m.BackingPath("g"), "other\n")
	}))
	hold := startProc(t, exec.Command("python3", "-u", "-c", `
import os, sys
fds, errs = [], []
for i in range(int(sys.argv[2])):
    try:
        fds.append(os.open(sys.argv[1], os.O_RDONLY))
    except OSError as e:
        errs.append(e.errno)
print(len(fds), sorted(set(errs)))
sys.stdin.read()
for fd in fds:
    os.close(fd)
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY))
    print("reopen ok")
except OSError as e:
    print("reopen", e.errno)
`, m.Path("f"), strconv.Itoa(tries)), true)
	line := hold.line(t, time.Minute, "holder's opens")
	want := fmt.Sprintf("%d [%d]", capN, syscall.EMFILE)
	if line != want {
		t.Errorf("owner A opening f %d times: %q, want %q (opened, errnos)", tries, line, want)
	}
	// Another owner (this process) still opens files while A holds its 50.
	for _, name := range []string{"f", "g"} {
		if _, err := os.ReadFile(m.Path(name)); err != nil {
			t.Errorf("owner B reading %s while owner A is at its cap: %v", name, err)
		}
	}
	m.WaitRefusal("open", "f", "RESOURCE_LIMIT", syscall.EMFILE)
	var lines int
	for _, e := range m.Audit() {
		if e.str("code") == "RESOURCE_LIMIT" {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d RESOURCE_LIMIT audit lines for one burst of %d refused opens, want 1", lines, tries-capN)
	}
	hold.closeStdin()
	if got := hold.line(t, time.Minute, "holder's reopen"); got != "reopen ok" {
		t.Errorf("owner A after closing its descriptors: %q, want reopen ok", got)
	}
	hold.wait()
}
