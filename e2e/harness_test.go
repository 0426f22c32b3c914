package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/templive"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Timeouts of the harness. They bound waiting for something that should
// happen; no test asserts that anything is fast.
const (
	mountTimeout   = 20 * time.Second // realmfs start until the mount shows in mountinfo
	exitTimeout    = 20 * time.Second // unmount until the daemon has exited
	unmountTimeout = 10 * time.Second // retrying fusermount3 -u while the mount is busy
	// stateTimeout bounds polling for a state no process announces (an
	// audit line, a temp removed after the last release, the mount-time
	// sweep done): generous, for a loaded machine and a race-built daemon.
	stateTimeout = 30 * time.Second
)

// nobody is the unprivileged uid/gid the tests act as.
const nobody = 65534

var (
	// binDir holds realmfs and a copy of this test binary, world-readable so
	// that processes of other uids can run them.
	binDir string
	// realmfsBin is the realmfs under test.
	realmfsBin string
	// selfBin is a world-executable copy of this test binary (helper modes).
	selfBin string
	// baseDir is this run's scratch root, world-searchable.
	baseDir string
)

// TestMain builds realmfs once per run (keeping the Go build cache), unless the
// binary was started as a helper process, in which case it runs the helper.
func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name, os.Args[1:]))
	}
	if os.Getenv(posixDirEnv) != "" {
		// A posixtest child: no build, no set-up, just the one test.
		os.Exit(m.Run())
	}
	os.Exit(setupAndRun(m))
}

func setupAndRun(m *testing.M) int {
	var err error
	baseDir, err = os.MkdirTemp("", "realm-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(baseDir)
	binDir = filepath.Join(baseDir, "bin")
	for _, d := range []string{baseDir, binDir} {
		err := os.MkdirAll(d, 0o755)
		if err == nil {
			err = os.Chmod(d, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	if realmfsBin, err = buildRealmfs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building realmfs:", err)
		return 1
	}
	self, err := os.Executable()
	if err == nil {
		selfBin = filepath.Join(binDir, "e2e.test")
		err = copyFile(self, selfBin, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: copying the test binary:", err)
		return 1
	}
	flag.Parse()
	startWatchdog()
	// Become a subreaper: a detached realmfs is re-parented to this process
	// when its parent exits, so its exit status can still be collected.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: PR_SET_CHILD_SUBREAPER:", err)
	}
	return m.Run()
}

// moduleRoot is the directory of go.mod (the tests run in e2e/).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(wd)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("no go.mod above %s: %w", wd, err)
	}
	return root, nil
}

// goBuild builds the package pkg of this module into binDir/name with the
// go build flags given; if the environment variable prebuilt names a
// binary, that is copied instead (CI may build once for several runs).
func goBuild(name, pkg, prebuilt string, flags ...string) (string, error) {
	return goBuildEnv(nil, name, pkg, prebuilt, flags...)
}

// goBuildEnv is goBuild with more environment variables for go build
// (CGO_ENABLED=0 for a static binary).
func goBuildEnv(env []string, name, pkg, prebuilt string, flags ...string) (string, error) {
	out := filepath.Join(binDir, name)
	if bin := os.Getenv(prebuilt); prebuilt != "" && bin != "" {
		return out, copyFile(bin, out, 0o755)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// raceBuild reports whether the daemons under test are built with the race
// detector (REALM_E2E_RACE=1, which scripts/run-e2e.sh sets); each mount's
// cleanup then fails the test on a race the daemon reported.
func raceBuild() bool { return os.Getenv("REALM_E2E_RACE") == "1" }

// raceFlags are the go build flags that raceBuild asks for.
func raceFlags() []string {
	if raceBuild() {
		return []string{"-race"}
	}
	return nil
}

// lockdepBuild reports whether the daemons under test are built with the
// tag lockdep (REALM_E2E_LOCKDEP=1): a lock taken out of the order of
// internal/lockorder is reported, and each mount's cleanup fails the test
// on a report of its daemon.
func lockdepBuild() bool { return os.Getenv("REALM_E2E_LOCKDEP") == "1" }

// daemonFlags are the go build flags of a daemon under test with the
// build tags tags: with the race detector and lockdep as asked. The tags
// replace GOFLAGS' (the podman bindings' are realmctl's, not realmfs's).
func daemonFlags(tags ...string) []string {
	flags := raceFlags()
	if lockdepBuild() {
		tags = append(tags, "lockdep")
	}
	if len(tags) > 0 {
		flags = append(flags, "-tags", strings.Join(tags, ","))
	}
	return flags
}

func buildRealmfs() (string, error) {
	return goBuild("realmfs", "./cmd/realmfs", "REALMFS_BIN", daemonFlags()...)
}

var (
	realmtestOnce sync.Once
	realmtestPath string
	realmtestErr  error
)

// realmtestBinary is realmfs built with -tags realmtest (REALMFS_FAIL_AT
// injects commit failures), built once per run.
func realmtestBinary(tb testing.TB) string {
	tb.Helper()
	realmtestOnce.Do(func() {
		realmtestPath, realmtestErr = goBuild("realmfs-realmtest", "./cmd/realmfs", "", daemonFlags("realmtest")...)
	})
	if realmtestErr != nil {
		tb.Fatalf("building realmfs with -tags realmtest: %v", realmtestErr)
	}
	return realmtestPath
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// requireFUSE skips the test unless it can mount: root, /dev/fuse and
// fusermount3. Under CI=true a missing requirement fails instead.
func requireFUSE(tb testing.TB) {
	tb.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the e2e tests mount as root and act as uid 65534)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = append(missing, "/dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		missing = append(missing, "fusermount3 (Debian package fuse3)")
	}
	if len(missing) == 0 {
		return
	}
	skipUnlessCI(tb, "e2e needs "+strings.Join(missing, ", "))
}

// skipUnlessCI skips the test for a missing requirement msg, or fails it
// under CI=true, where every requirement must be there.
func skipUnlessCI(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + " (CI=true: not skipping)")
	}
	tb.Skip(msg)
}

// requireTool skips (or under CI=true fails) when a program is not installed.
func requireTool(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			skipUnlessCI(tb, name+" is not installed")
		}
	}
}

// Mount is one running realmfs.
type Mount struct {
	Root     string // the test's scratch dir: backing/, mnt/, outside/, state/
	Backing  string // BACKING
	Dir      string // MOUNTPOINT
	Outside  string // a directory next to BACKING, outside it
	AuditLog string // --audit-log FILE
	LogFile  string // realmfs stdout and stderr
	Pid      int    // the daemon
	// journalDir is the journal's directory REALM_E2E_JOURNAL gave the
	// mount (opts), kept across restarts; "" none yet.
	journalDir string

	conn int // the FUSE connection id (/sys/fs/fuse/connections/N), 0 unknown

	cfg  mountConfig
	tb   testing.TB
	done chan struct{} // closed when the daemon has exited and exitErr is set
	// exitErr is the daemon's exit: nil for status 0; errUnknownExit when
	// the daemon was not a child of this process.
	exitErr error
	stopped bool
	// raceLog is the GORACE log_path of this mount's daemons (raceBuild).
	raceLog string
}

var errUnknownExit = errors.New("exit status unknown (daemon not a child of the test process)")

type mountConfig struct {
	opts    []string            // -o
	flags   []string            // other flags, e.g. --policy FILE
	detach  bool                // run without -f
	relPath bool                // pass BACKING and MOUNTPOINT relative to Root (run in Root)
	helper  bool                // mount with mount.fuse3 (as mount(8) and /etc/fstab do)
	cred    *syscall.Credential // run realmfs as this user (non-root mount)
	prepare func(m *Mount)      // populate BACKING (and Outside) before mounting
	bin     string              // the realmfs binary to run; "" is realmfsBin
	env     []string            // added to the daemon's environment
	nofile  int                 // the daemon's RLIMIT_NOFILE (prlimit), 0 as inherited
}

// MountOption configures mount.
type MountOption func(*mountConfig)

// Opts adds -o mount options, e.g. Opts("ro") or Opts("allow_other", "default_permissions").
func Opts(opts ...string) MountOption {
	return func(c *mountConfig) { c.opts = append(c.opts, opts...) }
}

// Flags adds command-line flags before BACKING, e.g. Flags("--policy", file).
func Flags(flags ...string) MountOption {
	return func(c *mountConfig) { c.flags = append(c.flags, flags...) }
}

// Detached starts realmfs without -f: the parent must exit 0 once the mount is
// ready, which the harness checks.
func Detached() MountOption { return func(c *mountConfig) { c.detach = true } }

// ViaMountFuse3 mounts as mount(8) does for an /etc/fstab line of type
// fuse.realmfs: mount.fuse3 BACKING MOUNTPOINT -t fuse.realmfs -o OPTS, which
// runs "realmfs BACKING MOUNTPOINT -o OPTS" and returns once it exits. No
// --audit-log or other flags can be passed that way.
func ViaMountFuse3() MountOption {
	return func(c *mountConfig) { c.helper, c.detach = true, true }
}

// RelativePaths passes BACKING and MOUNTPOINT as paths relative to the
// working directory realmfs is started in (m.Root).
func RelativePaths() MountOption { return func(c *mountConfig) { c.relPath = true } }

// AsUser runs realmfs as uid/gid (mounting through the setuid fusermount3);
// BACKING, MOUNTPOINT and state/ belong to that user.
func AsUser(uid, gid uint32) MountOption {
	return func(c *mountConfig) {
		c.cred = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
}

// FileLimit runs realmfs under `prlimit --nofile=N:N` (which execs it, so
// the daemon's pid is prlimit's): its descriptor limit, soft and hard, is
// n. Foreground mounts as root only.
func FileLimit(n int) MountOption { return func(c *mountConfig) { c.nofile = n } }

// Prepare runs fn before mounting, to populate m.Backing and m.Outside.
func Prepare(fn func(m *Mount)) MountOption {
	return func(c *mountConfig) { c.prepare = fn }
}

// Binary runs bin instead of the realmfs under test (e.g. realmtestBinary's
// build), with env added to the daemon's environment; Restart runs it
// again. Foreground mounts as root only.
func Binary(bin string, env ...string) MountOption {
	return func(c *mountConfig) { c.bin, c.env = bin, env }
}

// mount makes BACKING and MOUNTPOINT under a fresh temp dir, starts realmfs,
// waits for the mount to appear in /proc/self/mountinfo, and registers a
// cleanup that unmounts and asserts the daemon exited 0.
func mount(tb testing.TB, options ...MountOption) *Mount {
	tb.Helper()
	m := newMount(tb, options)
	if m.cfg.prepare != nil {
		m.cfg.prepare(m)
	}
	tb.Cleanup(m.cleanup)
	m.start()
	return m
}

// newMount applies options and makes a fresh mount's directories (BACKING,
// the mountpoint, an outside dir and the state dir), owned by the mount's
// user if it has one; nothing is mounted yet.
func newMount(tb testing.TB, options []MountOption) *Mount {
	tb.Helper()
	requireFUSE(tb)
	var cfg mountConfig
	for _, o := range options {
		o(&cfg)
	}
	if (cfg.bin != "" || cfg.nofile > 0) && (cfg.detach || cfg.helper || cfg.cred != nil) {
		tb.Fatal("Binary, FileLimit: foreground mounts as root only")
	}
	root := tb.TempDir()
	// t.TempDir and its parent are 0700; other uids must reach the mount.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	m := &Mount{
		Root:    root,
		Backing: filepath.Join(root, "backing"),
		Dir:     filepath.Join(root, "mnt"),
		Outside: filepath.Join(root, "outside"),
		cfg:     cfg,
		tb:      tb,
	}
	state := filepath.Join(root, "state")
	m.AuditLog = filepath.Join(state, "audit.jsonl")
	m.LogFile = filepath.Join(state, "realmfs.log")
	for _, d := range []string{m.Backing, m.Dir, m.Outside, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if cfg.cred != nil {
		for _, d := range []string{m.Backing, m.Dir, state} {
			if err := os.Chown(d, int(cfg.cred.Uid), int(cfg.cred.Gid)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return m
}

// args is realmfs's command line for this mount.
func (m *Mount) args() []string {
	var args []string
	if !m.cfg.detach {
		args = append(args, "-f")
	}
	if opts := m.opts(); len(opts) > 0 {
		args = append(args, "-o", strings.Join(opts, ","))
	}
	args = append(args, "--audit-log", m.AuditLog, "--state-dir", filepath.Join(m.Root, "state"))
	if os.Getenv("REALM_E2E_DEBUG") == "1" && !m.cfg.detach { // --debug implies -f
		args = append(args, "--debug")
	}
	args = append(args, m.cfg.flags...)
	return append(args, m.argPaths()...)
}

// opts are the mount's -o options: with REALM_E2E_JOURNAL=1, every mount
// keeps the journal of changes (journal=on) unless the test says otherwise,
// in a directory of its own in the temp dir where that is on BACKING's
// filesystem (so that the tests that compare BACKING's listings meet no
// .realm-journal, and those that watch Root no journal; removed by
// cleanup), else in BACKING/.realm-journal (a BACKING on a filesystem of
// its own).
func (m *Mount) opts() []string {
	opts := m.cfg.opts
	if os.Getenv("REALM_E2E_JOURNAL") != "1" {
		return opts
	}
	for _, o := range opts {
		if strings.HasPrefix(o, "journal") {
			return opts
		}
	}
	opts = append(opts[:len(opts):len(opts)], "journal=on")
	if m.journalDir == "" {
		var rs, bs syscall.Stat_t
		if syscall.Stat(os.TempDir(), &rs) != nil || syscall.Stat(m.Backing, &bs) != nil || rs.Dev != bs.Dev {
			return opts
		}
		dir, err := os.MkdirTemp("", "realm-e2e-journal-")
		if err != nil {
			return opts
		}
		if c := m.cfg.cred; c != nil {
			os.Chown(dir, int(c.Uid), int(c.Gid))
		}
		m.journalDir = dir
	}
	return append(opts, "journal_dir="+m.journalDir)
}

// argPaths are BACKING and MOUNTPOINT as given on the command line.
func (m *Mount) argPaths() []string {
	if m.cfg.relPath {
		return []string{filepath.Base(m.Backing), filepath.Base(m.Dir)}
	}
	return []string{m.Backing, m.Dir}
}

// start launches realmfs and waits until the mount is ready. It is also the
// restart after Kill (issue 4's crash tests).
func (m *Mount) start() {
	tb := m.tb
	tb.Helper()
	logf, err := os.OpenFile(m.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	bin := realmfsBin
	if m.cfg.bin != "" {
		bin = m.cfg.bin
	}
	line := append(append(append([]string{}, m.cfg.env...), filepath.Base(bin)), m.args()...)
	fmt.Fprintf(logf, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(line, " "))
	readyLog := m.daemonLog()
	var logStart int64
	if st, err := os.Stat(readyLog); err == nil {
		logStart = st.Size()
	}
	cmd := exec.Command(bin, m.args()...)
	if m.cfg.nofile > 0 {
		lim := strconv.Itoa(m.cfg.nofile)
		cmd = exec.Command("prlimit", append([]string{"--nofile=" + lim + ":" + lim, "--", bin}, m.args()...)...)
	}
	if len(m.cfg.env) > 0 {
		cmd.Env = append(os.Environ(), m.cfg.env...)
	}
	if m.cfg.helper {
		opts := append([]string{"rw"}, m.opts()...)
		cmd = exec.Command("mount.fuse3", m.Backing, m.Dir, "-t", "fuse.realmfs", "-o", strings.Join(opts, ","))
		cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
		fmt.Fprintf(logf, "=== via %s\n", strings.Join(cmd.Args, " "))
	}
	if raceBuild() {
		// A detached daemon's stderr is /dev/null: its race reports go to
		// files beside the log (race.PID), which checkRaces reads.
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, "GORACE=log_path="+m.racePrefix(tb))
	}
	if lockdepBuild() {
		// As the race reports: files beside the log (lockdep.PID).
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, "LOCKDEP_LOG="+m.lockdepPrefix(tb))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = m.Root
	if m.cfg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cfg.cred}
	}
	m.done = make(chan struct{})
	m.exitErr = nil
	m.stopped = false

	if m.cfg.detach {
		// Until the daemon is found, a failure leaves no process to wait for.
		noDaemon := func(format string, args ...any) {
			m.Pid = 0
			m.exitErr = errUnknownExit
			close(m.done)
			tb.Fatalf(format, args...)
		}
		// The parent must not exit before the mount is ready, and must exit 0.
		if err := cmd.Start(); err != nil {
			noDaemon("starting realmfs: %v", err)
		}
		parentDone := make(chan error, 1)
		go func() { parentDone <- cmd.Wait() }()
		select {
		case err = <-parentDone:
		case <-time.After(mountTimeout):
			_ = cmd.Process.Kill()
			noDaemon("detached realmfs parent did not exit within %v\n%s", mountTimeout, m.logTail())
		}
		if err != nil {
			noDaemon("detached realmfs parent: %v (want exit 0)\n%s", err, m.logTail())
		}
		// Checked at once, without polling: exit 0 promises a ready mount.
		if fstype, ok := mountFSType(m.Dir); !ok || fstype != "fuse.realmfs" {
			noDaemon("detached realmfs parent exited 0 but %s is not a fuse.realmfs mount yet (fstype %q)\n%s",
				m.Dir, fstype, m.logTail())
		}
		pid, err := findDaemon(m.Dir, m.argPaths()[1])
		if err != nil {
			noDaemon("finding the detached daemon: %v", err)
		}
		m.Pid = pid
		go func() {
			m.exitErr = waitForeignPid(pid)
			close(m.done)
		}()
		m.noteConn()
		return
	}

	if err := cmd.Start(); err != nil {
		// No process: nothing for Unmount and cleanup to wait for.
		m.stopped = true
		close(m.done)
		tb.Fatal(err)
	}
	m.Pid = cmd.Process.Pid
	// A detached mount elsewhere, looking for its daemon by arguments,
	// must not take this one (relative paths read the same in every test).
	claimedPids.Store(m.Pid, true)
	go func() {
		m.exitErr = cmd.Wait()
		close(m.done)
	}()
	// Ready is what the daemon says, not what mountinfo shows: the mount
	// appears there before the daemon has started its watcher and its
	// control socket, and a test that asks either at once must find them.
	// (A detached daemon's parent exits 0 only after the same point.)
	deadline := time.Now().Add(mountTimeout)
	for {
		if fstype, ok := mountFSType(m.Dir); ok {
			if fstype != "fuse.realmfs" {
				tb.Fatalf("%s mounted with type %q, want fuse.realmfs", m.Dir, fstype)
			}
			if loggedSince(readyLog, logStart, "msg=mounted ") || loggedSince(readyLog, logStart, `"msg":"mounted"`) {
				m.noteConn()
				return
			}
		}
		select {
		case <-m.done:
			tb.Fatalf("%s exited before mounting: %v\n%s", filepath.Base(bin), m.exitErr, m.logTail())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not mounted within %v\n%s", m.Dir, mountTimeout, m.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForeignPid waits for a process that this process became the reaper of
// (PR_SET_CHILD_SUBREAPER), or, failing that, polls until it is gone.
func waitForeignPid(pid int) error {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err == nil {
			if ws.Exited() && ws.ExitStatus() == 0 {
				return nil
			}
			return fmt.Errorf("daemon pid %d: %s", pid, describeWait(ws))
		}
		break
	}
	for {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return errUnknownExit
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describeWait(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

var claimedPids sync.Map // pid → true, daemons already attributed to a mount

// findDaemon finds a detached realmfs serving dir: the process running
// realmfsBin whose command line names dir, else one re-parented to this
// process that no other mount claimed.
func findDaemon(dir, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var orphans []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil ||
			strings.TrimSuffix(exe, " (deleted)") != realmfsBin {
			continue
		}
		if _, taken := claimedPids.Load(pid); taken || isWatcherProc(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if a := strings.TrimSuffix(string(a), "/"); a == dir || a == arg {
				claimedPids.Store(pid, true)
				return pid, nil
			}
		}
		if ppid(pid) == os.Getpid() {
			orphans = append(orphans, pid)
		}
	}
	if len(orphans) == 1 {
		claimedPids.Store(orphans[0], true)
		return orphans[0], nil
	}
	return 0, fmt.Errorf("no realmfs process for %s (candidates re-parented here: %v)", dir, orphans)
}

// isWatcherProc reports whether process pid is a daemon's watcher
// (realmfs again, whose command line names the mountpoint too: the
// environment it was started with says so).
func isWatcherProc(pid int) bool {
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return bytes.Contains(env, []byte("\x00_REALMFS_UNMOUNT_WATCH=1\x00")) || bytes.HasPrefix(env, []byte("_REALMFS_UNMOUNT_WATCH=1\x00"))
}

func ppid(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// mountFSType reports whether dir is a mount point in /proc/self/mountinfo
// and its filesystem type.
func mountFSType(dir string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	fstype, found := "", false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		if f := strings.Fields(post); len(f) > 0 {
			fstype, found = f[0], true // the last (topmost) mount wins
		}
	}
	return fstype, found
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// liveConns are the FUSE connections of this run's mounts, for the
// watchdog: id → mount point.
var liveConns sync.Map

// noteConn records the mount's FUSE connection id (the minor number of its
// st_dev) so that a hung mount can be aborted.
func (m *Mount) noteConn() {
	var st unix.Stat_t
	if err := unix.Stat(m.Dir, &st); err == nil && unix.Major(st.Dev) == 0 {
		m.conn = int(unix.Minor(st.Dev))
		liveConns.Store(m.conn, m.Dir)
	}
}

// abortConn aborts a FUSE connection: every request waiting on it fails with
// ENOTCONN and the daemon's /dev/fuse reads end. It mounts fusectl if needed.
func abortConn(conn int) {
	if conn <= 0 {
		return
	}
	const ctl = "/sys/fs/fuse/connections"
	path := fmt.Sprintf("%s/%d/abort", ctl, conn)
	if _, err := os.Stat(path); err != nil {
		_ = exec.Command("mount", "-t", "fusectl", "none", ctl).Run()
	}
	if err := os.WriteFile(path, []byte("1"), 0o200); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: aborting FUSE connection %d: %v\n", conn, err)
	}
	liveConns.Delete(conn)
}

// startWatchdog aborts the FUSE connections of this run's mounts shortly
// before the test binary's -test.timeout: a test hung in a request to a
// deadlocked daemon then fails with ENOTCONN instead of leaving a thread in
// uninterruptible sleep that keeps go test waiting forever.
func startWatchdog() {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout < time.Minute {
		return
	}
	time.AfterFunc(timeout-30*time.Second, func() {
		// Until the process ends: a test still running may mount again
		// (a restart) and hang again.
		for {
			liveConns.Range(func(k, v any) bool {
				fmt.Fprintf(os.Stderr, "e2e: watchdog: aborting FUSE connection %d of %s before the test timeout\n", k, v)
				abortConn(k.(int))
				return true
			})
			time.Sleep(time.Second)
		}
	})
}

// Path is a path through the mount.
func (m *Mount) Path(rel ...string) string {
	return filepath.Join(append([]string{m.Dir}, rel...)...)
}

// BackingPath is the same path in BACKING.
func (m *Mount) BackingPath(rel ...string) string {
	return filepath.Join(append([]string{m.Backing}, rel...)...)
}

// Mounted reports whether the mount is still in mountinfo.
func (m *Mount) Mounted() bool {
	fstype, ok := mountFSType(m.Dir)
	return ok && fstype == "fuse.realmfs"
}

// Unmount runs fusermount3 -u (as the mounting user), retrying while the mount
// is busy, falls back to umount -l, and returns the daemon's exit.
func (m *Mount) Unmount() error {
	m.tb.Helper()
	if m.stopped {
		return m.exitErr
	}
	m.stopped = true
	var lastErr error
	var lastOut []byte
	deadline := time.Now().Add(unmountTimeout)
	for m.Mounted() {
		cmd := exec.Command("fusermount3", "-u", m.Dir)
		if m.cfg.cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cfg.cred}
		}
		lastOut, lastErr = cmd.CombinedOutput()
		if lastErr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		m.tb.Errorf("fusermount3 -u %s: %v: %s; processes using the mount: %v", m.Dir, lastErr, lastOut, mountUsers(m.Dir))
		if msg, err := exec.Command("umount", "-l", m.Dir).CombinedOutput(); err != nil {
			m.tb.Errorf("umount -l %s: %v: %s", m.Dir, err, msg)
		}
	}
	return m.waitExit()
}

// mountUsers lists the processes whose cwd, root or open fds are under dir,
// with their state and, for blocked ones, the kernel function they sleep in.
func mountUsers(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var users []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		proc := "/proc/" + e.Name()
		var why []string
		for _, l := range []string{"cwd", "root"} {
			if t, err := os.Readlink(proc + "/" + l); err == nil && (t == dir || strings.HasPrefix(t, dir+"/")) {
				why = append(why, l)
			}
		}
		fds, _ := os.ReadDir(proc + "/fd")
		for _, fd := range fds {
			if t, err := os.Readlink(proc + "/fd/" + fd.Name()); err == nil && (t == dir || strings.HasPrefix(t, dir+"/")) {
				why = append(why, "fd "+fd.Name()+" "+t)
			}
		}
		// Threads blocked in a FUSE request hold the mount too.
		tasks, _ := os.ReadDir(proc + "/task")
		for _, task := range tasks {
			if w, _ := os.ReadFile(proc + "/task/" + task.Name() + "/wchan"); strings.Contains(string(w), "fuse") || string(w) == "request_wait_answer" {
				why = append(why, "thread "+task.Name()+" in "+string(w))
			}
		}
		if len(why) > 0 {
			cmd, _ := os.ReadFile(proc + "/cmdline")
			users = append(users, fmt.Sprintf("pid %d (%s): %s", pid, strings.ReplaceAll(strings.TrimSpace(string(cmd)), "\x00", " "), strings.Join(why, ", ")))
		}
	}
	return users
}

// waitExit waits for the daemon to exit; a daemon that does not is killed.
func (m *Mount) waitExit() error {
	select {
	case <-m.done:
	case <-time.After(exitTimeout):
		// A daemon stuck in the kernel (a deadlock with a request) does not
		// die of SIGKILL alone; aborting its connection frees both sides.
		abortConn(m.conn)
		if m.Pid > 0 {
			_ = syscall.Kill(m.Pid, syscall.SIGKILL)
		}
		<-m.done
		return fmt.Errorf("realmfs pid %d did not exit within %v after unmount (connection %d aborted, killed)", m.Pid, exitTimeout, m.conn)
	}
	if m.Mounted() {
		return fmt.Errorf("realmfs pid %d exited but %s is still mounted", m.Pid, m.Dir)
	}
	liveConns.CompareAndDelete(m.conn, m.Dir)
	return m.exitErr
}

// Signal sends sig to the daemon and returns its exit; the mount must be gone.
func (m *Mount) Signal(sig syscall.Signal) error {
	m.tb.Helper()
	m.stopped = true
	if m.Pid <= 0 {
		return errors.New("no daemon pid")
	}
	if err := syscall.Kill(m.Pid, sig); err != nil {
		return err
	}
	return m.waitExit()
}

// Kill kills the daemon with SIGKILL and detaches the dead mount, for crash
// tests; start it again with Restart. A daemon that does not die within 5s
// fails the test (see KillWithin).
func (m *Mount) Kill() {
	m.tb.Helper()
	if stuck := m.KillWithin(5 * time.Second); stuck != "" {
		m.tb.Errorf("%s; aborted its FUSE connection %d", stuck, m.conn)
	}
}

// KillWithin is Kill that cannot hang and lets the caller judge: SIGKILL,
// and if the daemon has not exited within grace (a thread stuck in the
// kernel keeps /dev/fuse open, so the connection is never aborted and every
// process on the mount waits forever), it aborts the FUSE connection. It
// returns "" or a description of the stuck daemon. The dead mount is
// detached.
func (m *Mount) KillWithin(grace time.Duration) (stuck string) {
	m.tb.Helper()
	m.stopped = true
	if m.Pid > 0 {
		_ = syscall.Kill(m.Pid, syscall.SIGKILL)
	}
	select {
	case <-m.done:
	case <-time.After(grace):
		stuck = fmt.Sprintf("realmfs pid %d did not exit within %v of SIGKILL: %s", m.Pid, grace, threadStates(m.Pid))
		abortConn(m.conn)
		<-m.done
	}
	liveConns.CompareAndDelete(m.conn, m.Dir)
	if m.Mounted() {
		if msg, err := exec.Command("fusermount3", "-u", "-z", m.Dir).CombinedOutput(); err != nil {
			if msg2, err2 := exec.Command("umount", "-l", m.Dir).CombinedOutput(); err2 != nil {
				m.tb.Fatalf("detaching killed mount: %v %s; %v %s", err, msg, err2, msg2)
			}
		}
	}
	return stuck
}

// threadStates describes the daemon's threads that are still alive: their
// state and kernel wait channel.
func threadStates(pid int) string {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, t := range tasks {
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, t.Name()))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		state := ""
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				state = strings.TrimSpace(v)
			}
		}
		out = append(out, fmt.Sprintf("tid %s %s wchan %s", t.Name(), state, wchan))
	}
	return strings.Join(out, "; ")
}

// Restart starts realmfs again over the same BACKING and MOUNTPOINT.
func (m *Mount) Restart() {
	m.tb.Helper()
	if !m.stopped {
		m.tb.Fatal("Restart of a running mount")
	}
	m.start()
}

func (m *Mount) cleanup() {
	err := m.Unmount()
	if errors.Is(err, errUnknownExit) {
		if m.Pid > 0 {
			m.tb.Logf("realmfs pid %d: %v", m.Pid, err)
		}
		err = nil
	}
	if err != nil {
		m.tb.Errorf("realmfs %s: %v (want a clean exit 0)", m.Dir, err)
	}
	m.checkRaces()
	m.checkLockOrder()
	m.checkWriteProtocol()
	if m.journalDir != "" {
		os.RemoveAll(m.journalDir) // the daemon is gone: opts made it
	}
	if m.tb.Failed() {
		m.tb.Logf("realmfs log (%s):\n%s", m.LogFile, m.logTail())
		if b, err := os.ReadFile(m.AuditLog); err == nil && len(b) > 0 {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 20 {
				lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-20)}, lines[len(lines)-20:]...)
			}
			m.tb.Logf("audit log (%s):\n%s", m.AuditLog, strings.Join(lines, "\n"))
		}
	}
}

// raceReport is how the race detector starts each report on stderr.
const raceReport = "WARNING: DATA RACE"

// checkRaces fails the test when a daemon of this mount (every start and
// restart) reported a data race, in LogFile or in a report file of
// racePrefix. A race-built daemon killed by the test exits with no status
// of its own, so the report is the one place the race shows.
func (m *Mount) checkRaces() {
	var reports []string
	if m.raceLog != "" {
		reports, _ = filepath.Glob(m.raceLog + ".*")
	}
	for _, name := range append([]string{m.LogFile}, reports...) {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if n := bytes.Count(b, []byte(raceReport)); n > 0 {
			i := bytes.Index(b, []byte(raceReport))
			m.tb.Errorf("realmfs %s: the race detector reported %d data race(s) in %s; the first:\n%s",
				m.Dir, n, name, b[i:min(len(b), i+8000)])
		}
	}
}

// checkLockOrder fails the test when a daemon of this mount reported a
// lock taken out of order (lockdepBuild), in LogFile or in a report file
// of lockdepPrefix: as checkRaces, for the same reasons.
func (m *Mount) checkLockOrder() {
	var reports []string
	if m.raceLog != "" {
		reports, _ = filepath.Glob(m.lockdepPrefix(m.tb) + ".*")
	}
	if len(reports) == 0 {
		// The daemon's log has each report too (at ERROR), in one line.
		reports = []string{m.LogFile}
	}
	for _, name := range reports {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if n := bytes.Count(b, []byte(lockorder.Marker)); n > 0 {
			i := bytes.Index(b, []byte(lockorder.Marker))
			m.tb.Errorf("realmfs %s: the lock order checker reported %d violation(s) in %s; the first:\n%s",
				m.Dir, n, name, b[i:min(len(b), i+8000)])
		}
	}
}

// checkWriteProtocol fails the test when a daemon of this mount logged an
// event the write protocol rejected (writeproto.Marker, logged where the
// write ends: fusefs's protocolEnded): the daemon called it out of the
// order its tables declare, which no process sees fail.
func (m *Mount) checkWriteProtocol() {
	b, err := os.ReadFile(m.LogFile)
	if err != nil {
		return
	}
	if n := bytes.Count(b, []byte(writeproto.Marker)); n > 0 {
		at := bytes.Index(b, []byte(writeproto.Marker))
		line := b[bytes.LastIndexByte(b[:at], '\n')+1:]
		if end := bytes.IndexByte(line, '\n'); end >= 0 {
			line = line[:end]
		}
		m.tb.Errorf("realmfs %s: the write protocol rejected %d event(s) in %s; the first:\n%s",
			m.Dir, n, m.LogFile, line)
	}
}

// lockdepPrefix is the LOCKDEP_LOG of this mount's daemons (the checker
// appends ".PID"), in the directory of racePrefix.
func (m *Mount) lockdepPrefix(tb testing.TB) string {
	return filepath.Join(filepath.Dir(m.racePrefix(tb)), "lockdep")
}

// raceDirs numbers the mounts' race report directories.
var raceDirs atomic.Int64

// racePrefix is the GORACE log_path of this mount's daemons (the race
// detector appends ".PID"), made on first use. It lies under baseDir, not
// the test's temp dir: GORACE splits its value at commas, colons and
// spaces, which a subtest's name may hold. The directory is world-writable
// for daemons of other uids.
func (m *Mount) racePrefix(tb testing.TB) string {
	if m.raceLog == "" {
		dir := filepath.Join(baseDir, "race", strconv.FormatInt(raceDirs.Add(1), 10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(dir, 0o1777); err != nil {
			tb.Fatal(err)
		}
		m.raceLog = filepath.Join(dir, "race")
	}
	return m.raceLog
}

// logTail is the end of realmfs's output.
func (m *Mount) logTail() string {
	b, err := os.ReadFile(m.LogFile)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 8 << 10
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	return string(b)
}

// FDCount is the number of open fds of the daemon other than pidfds.
func (m *Mount) FDCount() int {
	m.tb.Helper()
	n, _, _ := m.fdCounts()
	return n
}

// PidfdCount is the number of pidfds the daemon holds: the lock-owner
// caches, bounded by procinfo.DefaultCacheSize per resolver.
func (m *Mount) PidfdCount() int {
	m.tb.Helper()
	_, n, _ := m.fdCounts()
	return n
}

// FdinfoCount is the number of /proc/TID/fdinfo directories and files the
// daemon holds open: the tables of the threads that closed files last
// (procinfo.Resolver.Descriptors), bounded by procinfo.FdinfoCacheBound.
func (m *Mount) FdinfoCount() int {
	m.tb.Helper()
	_, _, n := m.fdCounts()
	return n
}

// fdinfoTarget matches the link of an open fdinfo directory or file.
var fdinfoTarget = regexp.MustCompile(`^/proc/[0-9]+/fdinfo(/[0-9]+)?$`)

// fdCounts counts the daemon's fds: pidfds and fdinfo apart, the rest
// together.
func (m *Mount) fdCounts() (other, pidfds, fdinfo int) {
	dir := fmt.Sprintf("/proc/%d/fd", m.Pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		m.tb.Fatalf("counting realmfs fds: %v", err)
	}
	for _, e := range entries {
		switch target, _ := os.Readlink(filepath.Join(dir, e.Name())); {
		case target == "anon_inode:[pidfd]":
			pidfds++
		case fdinfoTarget.MatchString(target):
			fdinfo++
		default:
			other++
		}
	}
	return other, pidfds, fdinfo
}

// FDs lists the daemon's open fds with their targets, for failure messages.
func (m *Mount) FDs() []string {
	dir := fmt.Sprintf("/proc/%d/fd", m.Pid)
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}

// auditEntry is one line of the audit log. Fields are kept loose (errno may
// be a number or a name) so the tests check meaning, not encoding.
type auditEntry map[string]any

func (e auditEntry) str(key string) string {
	switch v := e[key].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// path is the entry's workspace-relative path without a leading slash.
func (e auditEntry) path() string { return strings.TrimPrefix(e.str("path"), "/") }

// errnoIs reports whether the entry's errno is want, written as a number
// (13) or a name (EACCES).
func (e auditEntry) errnoIs(want syscall.Errno) bool {
	v := e.str("errno")
	return v == strconv.Itoa(int(want)) || v == unix.ErrnoName(want)
}

// Audit reads the audit log; every line must be a JSON object.
func (m *Mount) Audit() []auditEntry {
	m.tb.Helper()
	b, err := os.ReadFile(m.AuditLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		m.tb.Fatal(err)
	}
	var out []auditEntry
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e auditEntry
		if err := json.Unmarshal(line, &e); err != nil {
			m.tb.Fatalf("audit log line %d is not a JSON object: %v: %q", i+1, err, line)
		}
		out = append(out, e)
	}
	return out
}

// WaitAudit polls the audit log until an entry satisfies match (the log may
// be written asynchronously) and returns it, or fails the test.
func (m *Mount) WaitAudit(what string, match func(auditEntry) bool) auditEntry {
	m.tb.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		entries := m.Audit()
		for _, e := range entries {
			if match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, e := range entries {
				b, _ := json.Marshal(e)
				lines = append(lines, string(b))
			}
			m.tb.Fatalf("audit log has no entry for %s; it holds:\n%s", what, strings.Join(lines, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// daemonLog is where the daemon writes its log: the file of a --log flag
// or a log= option, or its stderr, LogFile.
func (m *Mount) daemonLog() string {
	for i, f := range m.cfg.flags {
		if f == "--log" && i+1 < len(m.cfg.flags) {
			return m.cfg.flags[i+1]
		}
	}
	for _, o := range m.cfg.opts {
		for _, kv := range strings.Split(o, ",") {
			if path, ok := strings.CutPrefix(kv, "log="); ok {
				return path
			}
		}
	}
	return m.LogFile
}

// loggedSince reports whether the log at path holds text past offset off
// (where this start of the daemon began writing).
func loggedSince(path string, off int64, text string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<30))
	return err == nil && bytes.Contains(b, []byte(text))
}

// WaitLogged polls the daemon log (daemonLog) until it holds text (the
// daemon writes it from its own goroutines), or fails the test.
func (m *Mount) WaitLogged(text string) {
	m.tb.Helper()
	m.WaitLoggedSince(0, text)
}

// WaitLoggedSince is WaitLogged of what the daemon logs past offset off
// (LogSize before what should make it log).
func (m *Mount) WaitLoggedSince(off int64, text string) {
	m.tb.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		if loggedSince(m.daemonLog(), off, text) {
			return
		}
		if time.Now().After(deadline) {
			m.tb.Fatalf("the daemon log has no %q past byte %d after %v:\n%s", text, off, stateTimeout, m.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LogSize is the daemon log's size now: the offset WaitLoggedSince waits
// past.
func (m *Mount) LogSize() int64 {
	m.tb.Helper()
	fi, err := os.Stat(m.daemonLog())
	if err != nil {
		m.tb.Fatal(err)
	}
	return fi.Size()
}

// WaitNoWriter waits until the daemon holds no descriptor of the backing
// file p open for writing. A writer's close returns once its commit is
// made, but the kernel sends the handle's RELEASE after, and until the
// daemon has served it the committed file may still be open for writing
// there (the former temp): exec(2) of it on the host is then ETXTBSY, as
// it is natively while any writer holds a binary open.
func (m *Mount) WaitNoWriter(p string) {
	m.tb.Helper()
	want, err := os.Stat(p)
	if err != nil {
		m.tb.Fatal(err)
	}
	deadline := time.Now().Add(stateTimeout)
	for m.daemonWrites(want) {
		if time.Now().After(deadline) {
			m.tb.Fatalf("the daemon (pid %d) still holds %s open for writing", m.Pid, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// daemonWrites reports whether the daemon holds a descriptor of the file
// fi open for writing.
func (m *Mount) daemonWrites(fi os.FileInfo) bool {
	dir := fmt.Sprintf("/proc/%d/fd", m.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || !os.SameFile(st, fi) {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", m.Pid, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				if fl, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil && fl&syscall.O_ACCMODE != syscall.O_RDONLY {
					return true
				}
			}
		}
	}
	return false
}

// WaitRefusal waits for the audit entry of a refusal of path with code (by
// op, unless op is "") and checks that it carries errno.
func (m *Mount) WaitRefusal(op, path, code string, errno syscall.Errno) auditEntry {
	m.tb.Helper()
	what := code + " on " + path
	if op != "" {
		what += " (" + op + ")"
	}
	e := m.WaitAudit(what, func(e auditEntry) bool {
		return (op == "" || e.str("op") == op) && e.path() == path && e.str("code") == code
	})
	if !e.errnoIs(errno) {
		m.tb.Errorf("%s: audit errno %q, want %s", what, e.str("errno"), unix.ErrnoName(errno))
	}
	return e
}

// checkAuditFields asserts the fields the contract names for a refusal are
// all present (comm and exe may be "": the caller may be gone).
func checkAuditFields(tb testing.TB, e auditEntry) {
	tb.Helper()
	for _, k := range []string{"time", "op", "path", "code", "errno", "pid", "comm", "exe", "uid", "rule"} {
		if _, ok := e[k]; !ok {
			tb.Errorf("audit entry lacks %q: %v", k, e)
		}
	}
}

// run runs a program and fails the test if it does not exit 0. It returns
// its standard output.
func run(tb testing.TB, dir string, env []string, name string, args ...string) string {
	tb.Helper()
	out, err := runErr(tb, dir, env, name, args...)
	if err != nil {
		tb.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return out
}

// runErr runs a program with a timeout and returns stdout and stderr
// combined, and its error.
func runErr(tb testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runStdin runs a program with stdin and returns its combined output.
func runStdin(tb testing.TB, stdin io.Reader, name string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// errnoOf extracts the errno from an error of os or unix.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// wantErrno fails the test unless err carries want.
func wantErrno(tb testing.TB, err error, want syscall.Errno, what string) {
	tb.Helper()
	if got := errnoOf(err); got != want {
		tb.Errorf("%s: got %v (errno %s), want %s", what, err, errnoName(got), unix.ErrnoName(want))
	}
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "none"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return strconv.Itoa(int(e))
}

func writeFile(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// backingLinks is st_nlink of the object at BACKING's path less the links
// the mount's journal keeps to it in kept/ (none without a journal), and,
// for BACKING's root, less the journal's directory in it: the workspace's
// names for it, which the mount reports as its st_nlink.
func (m *Mount) backingLinks(tb testing.TB, path string) uint64 {
	tb.Helper()
	st := lstat(tb, path)
	dir := m.journalDir
	if dir == "" {
		dir = m.BackingPath(".realm-journal")
	}
	ents, err := os.ReadDir(filepath.Join(dir, "kept"))
	if err != nil {
		return st.Nlink
	}
	n := st.Nlink
	for _, hidden := range []string{".realm-journal", templive.Dir} {
		if fi, err := os.Lstat(filepath.Join(path, hidden)); err == nil && fi.IsDir() && filepath.Clean(path) == filepath.Clean(m.Backing) {
			n-- // the journal's directory, the daemons' marks: the mount does not show them
		}
	}
	for _, e := range ents {
		var kst unix.Stat_t
		if unix.Lstat(filepath.Join(dir, "kept", e.Name()), &kst) == nil && kst.Dev == st.Dev && kst.Ino == st.Ino && n > 0 {
			n--
		}
	}
	return n
}

func lstat(tb testing.TB, path string) *unix.Stat_t {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		tb.Fatalf("lstat %s: %v", path, err)
	}
	return &st
}

// assertAbsent fails unless path does not exist (lstat ENOENT).
func assertAbsent(tb testing.TB, path string) {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != unix.ENOENT {
		tb.Errorf("%s: lstat gave %v, want ENOENT (it must not exist)", path, err)
	}
}

// backingNames lists every name beneath root (not through a mount),
// hidden ones included, as slash-separated relative paths.
func backingNames(tb testing.TB, root string) []string {
	tb.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("listing %s: %v", root, err)
	}
	return names
}

// tempResidue lists the .realm-tmp-* names beneath root, but the live
// daemons' marks (fusefs/templive: .realm-tmp-live/ in the root).
func tempResidue(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	for _, n := range backingNames(tb, root) {
		if strings.HasPrefix(filepath.Base(n), ".realm-tmp-") && !liveMark.MatchString(n) {
			out = append(out, n)
		}
	}
	return out
}

// liveMark matches the live daemons' marks of their temps' instances.
var liveMark = regexp.MustCompile(`^\.realm-tmp-live(/|$)`)

// assertNoTemp fails if a .realm-tmp-* name is left beneath root.
func assertNoTemp(tb testing.TB, root, when string) {
	tb.Helper()
	if left := tempResidue(tb, root); len(left) > 0 {
		tb.Errorf("%s: temp files left in BACKING: %v", when, left)
	}
}

// fileState is what a test compares to prove a file was not touched.
type fileState struct {
	data  string
	ino   uint64
	mtime unix.Timespec
	size  int64
}

func stateOf(tb testing.TB, path string) fileState {
	tb.Helper()
	st := lstat(tb, path)
	return fileState{data: readFile(tb, path), ino: st.Ino, mtime: st.Mtim, size: st.Size}
}

// diff reports how now differs from was ("" if it does not).
func (was fileState) diff(now fileState) string {
	var d []string
	if now.data != was.data {
		d = append(d, fmt.Sprintf("content %q, was %q", clip(now.data), clip(was.data)))
	}
	if now.ino != was.ino {
		d = append(d, fmt.Sprintf("inode %d, was %d", now.ino, was.ino))
	}
	if now.mtime != was.mtime {
		d = append(d, fmt.Sprintf("mtime %v, was %v", now.mtime, was.mtime))
	}
	return strings.Join(d, "; ")
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// lockedThread runs fn on a goroutine locked to its own OS thread (one
// kernel thread id, hence one owner under lockowner=pid) and waits for it.
func lockedThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fn()
	}()
	<-done
}
