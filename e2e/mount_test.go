package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/procinfo"
)

// TestMountModes mounts in the foreground and detached (the harness checks
// that the detached parent exits 0 only once the mount is in mountinfo), and
// checks the mount serves BACKING.
func TestMountModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []MountOption
	}{
		{"foreground", nil},
		{"detached", []MountOption{Detached()}},
		{"foreground, relative paths", []MountOption{RelativePaths()}},
		{"detached, relative paths", []MountOption{Detached(), RelativePaths()}},
		{"mount.fuse3 (fstab)", []MountOption{ViaMountFuse3()}},
		{"mount.fuse3 (fstab), ro", []MountOption{ViaMountFuse3(), Opts("ro")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "mount.fuse3") {
				requireTool(t, "mount.fuse3")
			}
			t.Parallel()
			m := mount(t, append(tc.opts, Prepare(func(m *Mount) {
				writeFile(t, m.BackingPath("before.txt"), "made before the mount\n")
			}))...)
			if got := readFile(t, m.Path("before.txt")); got != "made before the mount\n" {
				t.Errorf("before.txt through the mount = %q", got)
			}
			if m.cfg.helper && slices.Contains(m.cfg.opts, "ro") {
				err := os.WriteFile(m.Path("after.txt"), nil, 0o644)
				wantErrno(t, err, unix.EROFS, "write on a mount.fuse3 -o ro mount")
				return
			}
			writeFile(t, m.Path("after.txt"), "made through the mount\n")
			if got := readFile(t, m.BackingPath("after.txt")); got != "made through the mount\n" {
				t.Errorf("after.txt in BACKING = %q", got)
			}
			if err := m.Unmount(); err != nil {
				t.Errorf("fusermount3 -u: daemon exit: %v (want 0)", err)
			}
			if m.Mounted() {
				t.Errorf("%s still mounted after fusermount3 -u", m.Dir)
			}
			if got := readFile(t, m.BackingPath("after.txt")); got != "made through the mount\n" {
				t.Errorf("after.txt in BACKING after unmount = %q", got)
			}
		})
	}
}

// TestSignalsUnmount: SIGINT and SIGTERM unmount cleanly and exit 0.
func TestSignalsUnmount(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			m := mount(t)
			writeFile(t, m.Path("f"), "x")
			if err := m.Signal(sig); err != nil {
				t.Errorf("realmfs after %v: %v (want exit 0 and no mount)", sig, err)
			}
			if m.Mounted() {
				t.Errorf("still mounted after %v", sig)
			}
			if got := readFile(t, m.BackingPath("f")); got != "x" {
				t.Errorf("BACKING/f = %q after %v", got, sig)
			}
		})
	}
}

// startRaw runs realmfs with args (in the foreground unless args omit -f)
// and returns its exit code and output; if it is still running after wait it
// is treated as having mounted: it is unmounted and -1 returned.
func startRaw(t *testing.T, mnt string, cred *syscall.Credential, wait time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, realmfsBin, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		_ = exec.Command("fusermount3", "-u", mnt).Run()
		return -1, string(out)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("realmfs %v: %v", args, err)
	return 0, ""
}

// TestUsageAndFailures: usage errors exit 2, runtime failures exit 1 with a
// reason; neither leaves a mount. --version exits 0.
func TestUsageAndFailures(t *testing.T) {
	requireFUSE(t)
	root := t.TempDir()
	backing, mnt := filepath.Join(root, "backing"), filepath.Join(root, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(root, "missing")
	// A missing BACKING or MOUNTPOINT is a bad argument: usage (2) or
	// runtime (1) are both defensible; it must fail with a reason.
	for _, tc := range []struct {
		name string
		args []string
		want []int
	}{
		{"version", []string{"--version"}, []int{0}},
		{"no args", nil, []int{2}},
		{"one arg", []string{backing}, []int{2}},
		{"three args", []string{backing, mnt, mnt}, []int{2}},
		{"unknown flag", []string{"--no-such-flag", backing, mnt}, []int{2}},
		{"unknown -o option", []string{"-f", "-o", "no_such_option", backing, mnt}, []int{2}},
		{"bad passthrough value", []string{"-f", "-o", "passthrough=maybe", backing, mnt}, []int{2}},
		{"bad lockowner value", []string{"-f", "-o", "lockowner=nobody", backing, mnt}, []int{2}},
		{"missing BACKING, foreground", []string{"-f", missing, mnt}, []int{1, 2}},
		{"missing MOUNTPOINT, foreground", []string{"-f", backing, missing}, []int{1, 2}},
		{"missing BACKING, detached", []string{missing, mnt}, []int{1, 2}},
		{"missing MOUNTPOINT, detached", []string{backing, missing}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := startRaw(t, mnt, nil, 15*time.Second, tc.args...)
			checkFailure(t, mnt, tc.args, code, out, tc.want)
		})
	}
	// A mount that fails at mount time is a runtime error (1) in both modes:
	// uid 65534 may not use allow_other unless /etc/fuse.conf has
	// user_allow_other, so fusermount3 refuses.
	if conf, _ := os.ReadFile("/etc/fuse.conf"); hasActiveLine(string(conf), "user_allow_other") {
		t.Log("/etc/fuse.conf allows user_allow_other: skipping the mount-time failure cases")
		return
	}
	userRoot := filepath.Join(root, "user")
	ub, um := filepath.Join(userRoot, "backing"), filepath.Join(userRoot, "mnt")
	for _, d := range []string{userRoot, ub, um} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"mount refused, foreground", []string{"-f", "-o", "allow_other", ub, um}},
		{"mount refused, detached", []string{"-o", "allow_other", ub, um}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := startRaw(t, um, asNobody, 15*time.Second, tc.args...)
			checkFailure(t, um, tc.args, code, out, []int{1})
			// The cause is fusermount3's own message ("failed to open
			// /dev/fuse", "option allow_other only allowed if
			// 'user_allow_other' is set"), which a detached daemon once
			// sent to /dev/null.
			if !strings.Contains(out, "fusermount3: ") {
				t.Errorf("realmfs %v: output %q does not carry fusermount3's reason", tc.args, out)
			}
		})
	}
}

func hasActiveLine(conf, word string) bool {
	for line := range strings.SplitSeq(conf, "\n") {
		if strings.TrimSpace(line) == word {
			return true
		}
	}
	return false
}

func checkFailure(t *testing.T, mnt string, args []string, code int, out string, want []int) {
	t.Helper()
	if code == -1 {
		t.Fatalf("realmfs %v kept running (it mounted?), want exit %v", args, want)
	}
	if !slices.Contains(want, code) {
		t.Errorf("realmfs %v: exit %d, want %v\n%s", args, code, want, out)
	}
	if strings.TrimSpace(out) == "" {
		t.Errorf("realmfs %v (exit %d) printed nothing; want a version or a reason", args, code)
	}
	if _, ok := mountFSType(mnt); ok {
		t.Errorf("realmfs %v left %s mounted", args, mnt)
		_ = exec.Command("fusermount3", "-u", mnt).Run()
	}
}

// TestDaemonFDsDoNotGrow: the daemon's fd count does not grow across 1,000
// creates and deletes, nor across 1,000 open/read/close of one file. The
// pidfds of the lock-owner caches (one per thread that used the mount) are
// counted apart: they may grow, up to the caches' bound; so are the fdinfo
// tables kept of the threads that closed files last (procinfo.FdinfoCacheBound).
func TestDaemonFDsDoNotGrow(t *testing.T) {
	m := mount(t)
	dir := m.Path("churn")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path("read-me"), "some bytes\n")
	// Warm up once so that lazily opened things (directory fd caches) exist
	// before the baseline is taken.
	churn := func(n int) {
		for i := range n {
			p := filepath.Join(dir, fmt.Sprintf("f%04d", i))
			if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, m.Path("read-me")); got != "some bytes\n" {
				t.Fatalf("read-me = %q", got)
			}
		}
	}
	churn(10)
	dropCaches(t)
	before := m.FDCount()
	beforeList := m.FDs()
	churn(1000)
	// Forgotten nodes may release their fds only when the kernel evicts
	// them; ask it to, then allow the daemon a moment to process FORGETs.
	const slack = 2
	var after int
	deadline := time.Now().Add(stateTimeout)
	for {
		dropCaches(t)
		after = m.FDCount()
		if after <= before+slack || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after > before+slack {
		t.Errorf("realmfs fds grew from %d to %d across 1,000 create/delete/read loops\nbefore: %v\nafter: %v",
			before, after, beforeList, m.FDs())
	}
	// Two resolvers: the lock owners', and the pid-mode one that names a
	// thread's process.
	if n := m.PidfdCount(); n == 0 || n > 2*procinfo.DefaultCacheSize {
		t.Errorf("realmfs holds %d pidfds, want 1 to %d", n, 2*procinfo.DefaultCacheSize)
	}
	// The fdinfo tables kept of the threads that closed files last.
	if n := m.FdinfoCount(); n > procinfo.FdinfoCacheBound {
		t.Errorf("realmfs holds %d fdinfo files, want at most %d", n, procinfo.FdinfoCacheBound)
	}
}

// TestPidfdCacheBounded: threads come and go by the thousand (each a new
// process writing through the mount); the daemon's pidfds stay within the
// lock-owner caches' bound, and every process got its own owner's lock.
func TestPidfdCacheBounded(t *testing.T) {
	t.Parallel()
	// No fsync a write: the caches are what is measured, and 600 commits
	// with two fsyncs each took most of the test's 14 s in make test.
	m := mount(t, Opts("durability=atomic"))
	const procs = 600 // more than procinfo.DefaultCacheSize
	// One shell forks each writer (a subshell: a process of its own, one
	// after another), which costs a fork where an exec from here cost a
	// fork and two execs.
	script := `i=0
while [ "$i" -lt "$1" ]; do
	( echo "$i" > "$(printf 'f%03d' $((i % 10)))" ) || { echo "process $i failed" >&2; exit 1; }
	i=$((i + 1))
done`
	cmd := exec.Command("sh", "-c", script, "sh", strconv.Itoa(procs))
	cmd.Dir = m.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writers: %v: %s", err, out)
	}
	if n := m.PidfdCount(); n == 0 || n > 2*procinfo.DefaultCacheSize {
		t.Errorf("after %d processes realmfs holds %d pidfds, want 1 to %d", procs, n, 2*procinfo.DefaultCacheSize)
	}
	if got := readFile(t, m.Path("f009")); got != strconv.Itoa(procs-1)+"\n" {
		t.Errorf("f009 = %q, want the last writer's %d", got, procs-1)
	}
}

// dropCaches asks the kernel to evict dentries and inodes (FUSE FORGETs).
func dropCaches(t testing.TB) {
	t.Helper()
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0o200); err != nil {
		t.Logf("drop_caches: %v", err)
	}
}

// TestReadOnly: -o ro refuses every modification with EROFS and serves reads.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("ro"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "original")
		writeFile(t, m.BackingPath("d", "g"), "g")
	}))
	if got := readFile(t, m.Path("f")); got != "original" {
		t.Errorf("read through ro mount = %q", got)
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"create", func() error { return os.WriteFile(m.Path("new"), nil, 0o644) }},
		{"open for write", func() error {
			f, err := os.OpenFile(m.Path("f"), os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"truncate", func() error { return os.Truncate(m.Path("f"), 0) }},
		{"mkdir", func() error { return os.Mkdir(m.Path("newdir"), 0o755) }},
		{"unlink", func() error { return os.Remove(m.Path("f")) }},
		{"rmdir", func() error { return unix.Rmdir(m.Path("d")) }},
		{"rename", func() error { return os.Rename(m.Path("f"), m.Path("f2")) }},
		{"link", func() error { return os.Link(m.Path("f"), m.Path("f3")) }},
		{"symlink", func() error { return os.Symlink("f", m.Path("l")) }},
		{"chmod", func() error { return os.Chmod(m.Path("f"), 0o600) }},
		{"setxattr", func() error { return unix.Setxattr(m.Path("f"), "user.x", []byte("1"), 0) }},
		{"mkfifo", func() error { return unix.Mkfifo(m.Path("p"), 0o644) }},
	} {
		wantErrno(t, tc.op(), unix.EROFS, tc.name+" on an ro mount")
	}
	if got := readFile(t, m.BackingPath("f")); got != "original" {
		t.Errorf("BACKING/f = %q after refused writes", got)
	}
	entries, err := os.ReadDir(m.Backing)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("BACKING holds %d entries after refused writes, want 2 (d, f)", len(entries))
	}
}

// TestTempNamesHidden: names .realm-tmp-* in BACKING are never listed and
// do not exist on the mount: their lookup, removal and renaming away are
// ENOENT, as for any absent name. Making one, by any call, is refused
// (EACCES, audited PATH_ESCAPE), and BACKING is left as it was.
func TestTempNamesHidden(t *testing.T) {
	t.Parallel()
	m := mount(t)
	// The mount-time sweep removes temps a crashed daemon left: the names
	// are planted after it, or it may find them first (it runs in the
	// background).
	waitForLine(t, m.LogFile, "sweep done")
	writeFile(t, m.Path("visible"), "v")
	writeFile(t, m.BackingPath(".realm-tmp-residue"), "hidden")
	writeFile(t, m.BackingPath("sub", ".realm-tmp-x"), "hidden")
	for _, dir := range []string{m.Dir, m.Path("sub")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".realm-tmp-") {
				t.Errorf("%s lists %s", dir, e.Name())
			}
		}
	}
	for _, p := range []string{m.Path(".realm-tmp-residue"), m.Path("sub", ".realm-tmp-x")} {
		_, err := os.Lstat(p)
		wantErrno(t, err, unix.ENOENT, "lstat "+p)
		_, err = os.ReadFile(p)
		wantErrno(t, err, unix.ENOENT, "open "+p)
		wantErrno(t, unix.Unlink(p), unix.ENOENT, "unlink "+p)
		wantErrno(t, unix.Rmdir(p), unix.ENOENT, "rmdir "+p)
		wantErrno(t, unix.Rename(p, m.Path("moved")), unix.ENOENT, "rename from "+p)
	}
	made := m.Path(".realm-tmp-made")
	for _, op := range []struct {
		name, audit string
		do          func() error
	}{
		{"create", "create", func() error {
			return closeFd(unix.Open(made, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644))
		}},
		{"mkdir", "mkdir", func() error { return unix.Mkdir(made, 0o755) }},
		{"mkfifo", "mknod", func() error { return unix.Mkfifo(made, 0o644) }},
		{"symlink", "symlink", func() error { return unix.Symlink("visible", made) }},
		{"link", "link", func() error { return unix.Link(m.Path("visible"), made) }},
		{"rename to", "rename", func() error { return unix.Rename(m.Path("visible"), made) }},
	} {
		wantErrno(t, op.do(), unix.EACCES, op.name+" .realm-tmp-made")
		m.WaitAudit(op.audit+" of .realm-tmp-made", func(e auditEntry) bool {
			return e.str("op") == op.audit && e.path() == ".realm-tmp-made" && e.str("code") == "PATH_ESCAPE"
		})
	}
	assertAbsent(t, m.BackingPath(".realm-tmp-made"))
	assertAbsent(t, m.BackingPath("moved"))
	if got := readFile(t, m.BackingPath("visible")); got != "v" {
		t.Errorf("visible = %q after refused operations", got)
	}
	for _, p := range []string{".realm-tmp-residue", "sub/.realm-tmp-x"} {
		if got := readFile(t, m.BackingPath(p)); got != "hidden" {
			t.Errorf("%s = %q in BACKING, want it untouched", p, got)
		}
	}
	for _, e := range m.Audit() {
		if e.path() != ".realm-tmp-made" {
			t.Errorf("audit line for an operation on an absent name: %v", e)
		}
	}
}

// TestCacheTimeouts: the kernel keeps what the cache options allow it to
// keep and no more. Unwatched (watch=off) with negative_timeout=600 a name
// found absent stays absent on the mount after it appears in BACKING (until
// the mount itself creates it; watched, the watcher tells the kernel, see
// coherence_test.go); with every timeout 0 a change in BACKING shows at
// once; and a long entry_timeout does not let a cached name bypass the
// guard: its open is still verified and refused.
func TestCacheTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("negative entries kept", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Opts("negative_timeout=600", "watch=off"))
		_, err := os.Stat(m.Path("late"))
		wantErrno(t, err, unix.ENOENT, "stat of a name not yet in BACKING")
		writeFile(t, m.BackingPath("late"), "x")
		_, err = os.Stat(m.Path("late"))
		wantErrno(t, err, unix.ENOENT, "stat within negative_timeout of a name created behind the mount")
		// A create through the mount replaces the negative entry.
		writeFile(t, m.Path("late2"), "y")
		if got := readFile(t, m.Path("late2")); got != "y" {
			t.Errorf("late2 = %q", got)
		}
	})
	t.Run("no cache", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Opts("entry_timeout=0,attr_timeout=0"), Prepare(func(m *Mount) {
			writeFile(t, m.BackingPath("f"), "short")
		}))
		if got := readFile(t, m.Path("f")); got != "short" {
			t.Fatalf("f = %q", got)
		}
		writeFile(t, m.BackingPath("f"), "much longer content")
		st, err := os.Stat(m.Path("f"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != int64(len("much longer content")) {
			t.Errorf("size on the mount = %d right after a change in BACKING, want %d", st.Size(), len("much longer content"))
		}
		os.Remove(m.BackingPath("f"))
		_, err = os.Stat(m.Path("f"))
		wantErrno(t, err, unix.ENOENT, "stat right after removal in BACKING")
	})
	t.Run("cached name still guarded", func(t *testing.T) {
		t.Parallel()
		// Unwatched, so that only the guard stands between the cached
		// name and the swapped object.
		m := mount(t, Opts("entry_timeout=600,attr_timeout=600", "watch=off"), Prepare(func(m *Mount) {
			writeFile(t, m.BackingPath("d", "f"), "inside")
		}))
		if got := readFile(t, m.Path("d", "f")); got != "inside" {
			t.Fatalf("d/f = %q", got)
		}
		// Swap d for a symlink out of the workspace behind the mount: the
		// kernel still holds d and d/f, but the open reaches the daemon,
		// which finds the object changed.
		outside := t.TempDir()
		writeFile(t, filepath.Join(outside, "f"), "SECRET")
		if err := os.Rename(m.BackingPath("d"), m.BackingPath("d.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, m.BackingPath("d")); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(m.Path("d", "f"))
		if string(b) == "SECRET" {
			t.Fatal("a cached name led out of the workspace")
		}
		if err == nil && string(b) != "inside" {
			t.Errorf("d/f = %q, want an error or the original content", b)
		}
	})
}
