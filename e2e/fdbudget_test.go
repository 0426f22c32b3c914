package e2e

// Issue 28 item 7: a descriptor budget for the whole daemon. Each test
// mounts with a daemon limit of fdLimit descriptors (FileLimit, prlimit),
// lets an attacker take all it can, and checks that another owner still
// opens files and lists directories, and that the attacker was refused
// with EMFILE, audited RESOURCE_LIMIT. Before the budget, each of these
// left the daemon itself at EMFILE, for every owner.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fdLimit is the daemon's RLIMIT_NOFILE in these tests: half of it is the
// per-owner bound realmfs derives (max_fds_per_owner's default), an eighth
// the idle directory fds it keeps (fdbudget.DirFdBound).
const fdLimit = 4096

// pyRaise lifts a python attacker's own descriptor limit, so that only the
// daemon's bounds what it may hold.
const pyRaise = `
import os, sys, resource
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
`

// startAttacker starts script (after pyRaise) in a session of its own (a
// lock owner of its own under lockowner=session) and returns it with the
// first line it prints once it holds all it could.
func startAttacker(t *testing.T, m *Mount, script string, args ...string) (*proc, string) {
	t.Helper()
	cmd := exec.Command("setsid", append([]string{"python3", "-u", "-c", pyRaise + script}, args...)...)
	cmd.Dir = m.Dir
	p := startProc(t, cmd, true)
	return p, p.line(t, 2*time.Minute, "attacker's holdings")
}

// checkOtherOwner checks that this process (another lock owner) opens
// files, holds several at once, and lists directories, on the mount.
func checkOtherOwner(t *testing.T, m *Mount, file, dir string) {
	t.Helper()
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for i := range 16 {
		f, err := os.Open(m.Path(file))
		if err != nil {
			t.Errorf("another owner's open %d of %s while the attacker holds all it can: %v", i, file, err)
			return
		}
		held = append(held, f)
	}
	if _, err := os.ReadFile(m.Path(file)); err != nil {
		t.Errorf("another owner reading %s: %v", file, err)
	}
	if _, err := os.ReadDir(m.Path(dir)); err != nil {
		t.Errorf("another owner listing %s: %v", dir, err)
	}
	if err := os.WriteFile(m.Path(dir, "written-by-other"), []byte("x\n"), 0o644); err != nil {
		t.Errorf("another owner writing in %s: %v", dir, err)
	}
}

// waitBudgetRefusal waits for the audit line of a RESOURCE_LIMIT refusal
// by the budget's rule, with one of errnos: the burst's first refusal.
func waitBudgetRefusal(t *testing.T, m *Mount, errnos ...syscall.Errno) {
	t.Helper()
	e := m.WaitAudit("RESOURCE_LIMIT by resource:fd-budget", func(e auditEntry) bool {
		if e.str("code") != "RESOURCE_LIMIT" || e.str("rule") != "resource:fd-budget" {
			return false
		}
		for _, errno := range errnos {
			if e.errnoIs(errno) {
				return true
			}
		}
		return false
	})
	checkAuditFields(t, e)
}

// parseHoldings splits an attacker's line "COUNT ERRNO [EXTRA]".
func parseHoldings(t *testing.T, line string) (count int, errno syscall.Errno, rest string) {
	t.Helper()
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 {
		t.Fatalf("attacker's line %q: want COUNT ERRNO ...", line)
	}
	c, err1 := strconv.Atoi(f[0])
	e, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("attacker's line %q: want COUNT ERRNO ...", line)
	}
	if len(f) == 3 {
		rest = f[2]
	}
	return c, syscall.Errno(e), rest
}

// TestFdBudgetFlock (case 8): an owner that opens and flocks files costs
// the daemon three descriptors a file (the handle's fd, the lock set's
// anchor, the locker's OFD fd). Counting handles, it stayed under its
// bound (half the limit) while the daemon ran out; counting descriptors,
// its budget ends first: a flock past it is ENOLCK, an open EMFILE, the
// burst audited once, and another owner still opens, lists and writes.
func TestFdBudgetFlock(t *testing.T) {
	requireTool(t, "python3", "setsid", "prlimit")
	const files = fdLimit / 2
	m := mount(t, FileLimit(fdLimit), Opts("lockowner=session"), Prepare(func(m *Mount) {
		if err := os.Mkdir(m.BackingPath("many"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			writeFile(t, m.BackingPath("many", fmt.Sprintf("f%d", i)), "x\n")
		}
		writeFile(t, m.BackingPath("other"), "other\n")
	}))
	hold, line := startAttacker(t, m, `
import fcntl
fds, lockerrs, openerr = [], set(), 0
for i in range(int(sys.argv[1])):
    try:
        fd = os.open("many/f%d" % i, os.O_RDONLY)
    except OSError as e:
        openerr = e.errno
        break
    fds.append(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lockerrs.add(e.errno)
print(len(fds), openerr, sorted(lockerrs))
sys.stdin.read()
`, strconv.Itoa(files))
	n, errno, lockErrs := parseHoldings(t, line)
	t.Logf("attacker: %d files open and flocked (lock errnos %s), then errno %d", n, lockErrs, errno)
	if errno != syscall.EMFILE {
		t.Errorf("attacker's open past its budget: errno %d (%v), want EMFILE (line %q)", errno, errno, line)
	}
	checkOtherOwner(t, m, "other", "many")
	// One line for the burst: its first refusal, a flock (ENOLCK) or an
	// open (EMFILE), whichever met the budget first.
	waitBudgetRefusal(t, m, syscall.EMFILE, syscall.ENOLCK)
	if fds := m.FDCount(); fds >= fdLimit-64 {
		t.Errorf("daemon holds %d descriptors of its %d", fds, fdLimit)
	}
	hold.closeStdin()
	hold.wait()
}

// TestFdBudgetDirectories (case 9): every directory the kernel caches is a
// node, and each node held an O_PATH fd of its directory in the daemon
// until the kernel forgot it: `find` over more directories than the
// daemon's limit left it at EMFILE until unmount. Idle directory fds are
// now closed past a bound (an eighth of the limit), and reopened on use:
// after `find`, the daemon holds about that bound, `find` succeeds, and a
// second walk (every fd reopened) too. An owner holding directories open
// by the thousand is held to its budget (EMFILE, audited), and another
// owner still opens and lists.
func TestFdBudgetDirectories(t *testing.T) {
	requireTool(t, "python3", "setsid", "prlimit", "find")
	const dirs = fdLimit + fdLimit/4
	const idleBound = fdLimit / 8
	m := mount(t, FileLimit(fdLimit), Opts("lockowner=session"), Prepare(func(m *Mount) {
		for i := range dirs {
			if err := os.MkdirAll(m.BackingPath("tree", fmt.Sprintf("g%d", i%64), fmt.Sprintf("d%d", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, m.BackingPath("other"), "other\n")
	}))
	for pass := range 2 {
		out, err := runErr(t, m.Dir, nil, "find", "tree", "-type", "d")
		if err != nil {
			t.Fatalf("find, pass %d: %v\n%s", pass, err, clip(out))
		}
		if got := strings.Count(out, "\n"); got != dirs+64+1 {
			t.Errorf("find, pass %d: %d directories, want %d", pass, got, dirs+64+1)
		}
		if fds := m.FDCount(); fds > idleBound+64 {
			t.Errorf("after find over %d directories (pass %d), the daemon holds %d descriptors; want at most the idle bound %d and 64", dirs, pass, fds, idleBound)
		}
	}
	hold, line := startAttacker(t, m, `
fds, err = [], 0
for root, dirs, _ in os.walk("tree"):
    for d in dirs:
        try:
            fds.append(os.open(os.path.join(root, d), os.O_RDONLY | os.O_DIRECTORY))
        except OSError as e:
            err = e.errno
            break
    if err:
        break
print(len(fds), err)
sys.stdin.read()
`)
	n, errno, _ := parseHoldings(t, line)
	t.Logf("attacker: %d directories open, then errno %d", n, errno)
	if errno != syscall.EMFILE {
		t.Errorf("attacker's opendir past its budget: errno %d (%v), want EMFILE (line %q)", errno, errno, line)
	}
	checkOtherOwner(t, m, "other", filepath.Join("tree", "g1"))
	waitBudgetRefusal(t, m, syscall.EMFILE)
	hold.closeStdin()
	hold.wait()
}

// TestFdBudgetTwoOwners (case 10): two owners (two sessions, under
// lockowner=session) each held half the limit (max_fds_per_owner's
// default) and a third got EMFILE from the daemon itself. Each owner may
// now take at most half of what the others left of the pool: both
// attackers are refused (EMFILE, audited) and the third owner opens, lists
// and writes.
func TestFdBudgetTwoOwners(t *testing.T) {
	requireTool(t, "python3", "setsid", "prlimit")
	m := mount(t, FileLimit(fdLimit), Opts("lockowner=session"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "content\n")
		writeFile(t, m.BackingPath("other"), "other\n")
		if err := os.Mkdir(m.BackingPath("d"), 0o755); err != nil {
			t.Fatal(err)
		}
	}))
	const script = `
fds, err = [], 0
for i in range(int(sys.argv[1])):
    try:
        fds.append(os.open("f", os.O_RDONLY))
    except OSError as e:
        err = e.errno
        break
print(len(fds), err)
sys.stdin.read()
`
	tries := strconv.Itoa(fdLimit)
	var held []int
	for _, who := range []string{"A", "B"} {
		p, line := startAttacker(t, m, script, tries)
		defer func() { p.closeStdin(); p.wait() }()
		n, errno, _ := parseHoldings(t, line)
		t.Logf("attacker %s: %d files open, then errno %d", who, n, errno)
		if errno != syscall.EMFILE {
			t.Errorf("attacker %s's open past its budget: errno %d (%v), want EMFILE (line %q)", who, errno, errno, line)
		}
		held = append(held, n)
	}
	if len(held) == 2 && held[1] >= held[0] {
		t.Errorf("attacker B took %d, attacker A %d: want B to get at most half of what A left", held[1], held[0])
	}
	checkOtherOwner(t, m, "other", "d")
	waitBudgetRefusal(t, m, syscall.EMFILE)
}
