package admit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/requestnotes"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/policy"
)

// tempPrefix stands for the write engine's temps (fusefs: TempPrefix).
const tempPrefix = ".realm-tmp-"

// place is a directory of the workspace by its path; asked counts the
// paths built of it.
type place struct {
	dir   string
	asked *int
}

func (p place) Rel(name string) string {
	if p.asked != nil {
		*p.asked++
	}
	return Join(p.dir, name)
}

// syncBuffer is an audit sink safe for the Auditor's writes and the
// test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the audit lines written so far, each "op path code errno rule".
func (b *syncBuffer) lines(t *testing.T) []string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s", ev.Op, ev.Path, ev.Code, ev.Errno, ev.Rule))
	}
	b.buf.Reset()
	return got
}

// wantLines wants the audit lines written since the last look to be want.
func (b *syncBuffer) wantLines(t *testing.T, want ...string) {
	t.Helper()
	if got := b.lines(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// testGate is a gate over a fresh backing dir with the built-in
// credential set (hiding denied entries when hide), its audit lines in
// log; own names the temps the mount is using.
type testGate struct {
	*Gate
	backing string
	log     *syncBuffer
	own     map[string]bool
}

func newTestGate(t *testing.T, hide bool, adjust func(*Gate)) *testGate {
	t.Helper()
	backing := t.TempDir()
	root, err := dirfd.OpenRoot(backing)
	if err != nil {
		t.Fatal(err)
	}
	boundary, err := dirfd.NewRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { boundary.Close(); dirfd.Close(root) })
	p := policy.Default()
	p.Credentials.Hide = hide
	var commitMu lockorder.RWMutex[lockorder.CommitMu]
	tg := &testGate{backing: backing, log: &syncBuffer{}, own: map[string]bool{}}
	tg.Gate = &Gate{
		Guard:    &guard.Guard{Policy: p.Matcher()},
		Audit:    audit.New(tg.log, time.Now, 0),
		Names:    guard.NameLocks{Table: locks.NewTable(), CommitMu: &commitMu},
		Patience: func() locks.Patience { return locks.Patience{} },
		Fds:      &fdbudget.Counts{},
		Owner: func(ctx context.Context) locks.Owner {
			return locks.Owner(fmt.Sprintf("pid:%d", caller(ctx).Pid))
		},
		Umasks:    &requestnotes.Notes{},
		RootFd:    root,
		Boundary:  boundary,
		Hidden:    func(name string) bool { return strings.HasPrefix(name, tempPrefix) },
		IsOwnTemp: func(name string) bool { return tg.own[name] },
	}
	tg.Guard.StartScan()
	if adjust != nil {
		adjust(tg.Gate)
	}
	return tg
}

// write puts a file into the backing dir, as a process outside the mount.
func (tg *testGate) write(t *testing.T, name string) {
	t.Helper()
	p := filepath.Join(tg.backing, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func callerCtx(pid uint32) context.Context {
	return &fuse.Context{Caller: fuse.Caller{Pid: pid}}
}

// TestRefusePathOnlyAudited: a refusal answers its code's errno; the
// workspace path is built (a walk of go-fuse's tree in the mount) only
// for the audit line, and not at all without an audit log.
func TestRefusePathOnlyAudited(t *testing.T) {
	tg := newTestGate(t, false, nil)
	asked := 0
	d := place{dir: "a/b", asked: &asked}
	ctx := context.Background()
	if errno := tg.Refuse(ctx, "lookup", d, "m", errcode.PathEscape, RuleEscapeMount); errno != syscall.EACCES {
		t.Errorf("Refuse: %v, want EACCES", errno)
	}
	if errno := tg.RefuseAs(ctx, "opendir", d, "", errcode.PathEscape, syscall.ESTALE, RuleEscapeMovedOut); errno != syscall.ESTALE {
		t.Errorf("RefuseAs: %v, want ESTALE", errno)
	}
	tg.log.wantLines(t,
		"lookup a/b/m PATH_ESCAPE EACCES escape:mount",
		"opendir a/b PATH_ESCAPE ESTALE escape:moved-out")
	if asked != 2 {
		t.Errorf("%d paths built for 2 audit lines", asked)
	}
	tg.Audit, asked = nil, 0
	if errno := tg.Refuse(ctx, "lookup", d, "m", errcode.PathEscape, RuleEscapeMount); errno != syscall.EACCES {
		t.Errorf("Refuse without an audit log: %v, want EACCES", errno)
	}
	tg.RefuseAs(ctx, "opendir", d, "", errcode.PathEscape, syscall.ESTALE, RuleEscapeMovedOut)
	if asked != 0 {
		t.Errorf("%d paths built with no audit log", asked)
	}
}

// TestAdmitEntry: read-only first (EROFS, no line), then a hidden name:
// absent (ENOENT, no line) to an operation that needs it, refused
// (EACCES, PATH_ESCAPE escape:temp-name) to one that makes it.
func TestAdmitEntry(t *testing.T) {
	for _, tt := range []struct {
		readOnly bool
		name     string
		use      guard.Use
		want     syscall.Errno
		line     string
	}{
		{true, tempPrefix + "1", guard.Makes, syscall.EROFS, ""},
		{true, "f", guard.Removes, syscall.EROFS, ""},
		{false, tempPrefix + "1", guard.Removes, syscall.ENOENT, ""},
		{false, tempPrefix + "1", guard.MovesFrom, syscall.ENOENT, ""},
		{false, tempPrefix + "1", guard.Makes, syscall.EACCES, "create d/" + tempPrefix + "1 PATH_ESCAPE EACCES escape:temp-name"},
		{false, "f", guard.Makes, 0, ""},
	} {
		tg := newTestGate(t, false, func(g *Gate) { g.ReadOnly = tt.readOnly })
		if got := tg.AdmitEntry(context.Background(), "create", place{dir: "d"}, tt.name, tt.use); got != tt.want {
			t.Errorf("AdmitEntry(ro %v, %q, %v) = %v, want %v", tt.readOnly, tt.name, tt.use, got, tt.want)
		}
		if tt.line == "" {
			tg.log.wantLines(t)
		} else {
			tg.log.wantLines(t, tt.line)
		}
	}
}

// TestCredentialLines: a credential refusal names the glob that denied it
// and where the glob was written; one the policy hides is absent from
// lookup (ENOENT) and from listings, and refused to mkdir.
func TestCredentialLines(t *testing.T) {
	tg := newTestGate(t, true, nil)
	tg.write(t, ".env")
	ctx := context.Background()
	if errno := tg.NoteLookup(ctx, place{}, ".env", statOf(t, tg, ".env"), 0); errno != syscall.ENOENT {
		t.Errorf("lookup of a hidden credential: %v, want ENOENT", errno)
	}
	if errno := tg.DenyHiddenCredential(ctx, "mkdir", place{}, ".ssh"); errno != syscall.EACCES {
		t.Errorf("mkdir of a hidden credential: %v, want EACCES", errno)
	}
	for _, line := range tg.log.lines(t) {
		if !strings.Contains(line, "CREDENTIAL_PATH_DENIED") {
			t.Errorf("audit line %q: want CREDENTIAL_PATH_DENIED", line)
		}
	}
	hidden := tg.HiddenIn(place{dir: "src"})
	for name, want := range map[string]bool{"main.go": false, ".env": true, tempPrefix + "x": true} {
		if got := hidden(name); got != want {
			t.Errorf("listing of src hides %q: %v, want %v", name, got, want)
		}
	}
	if shown := newTestGate(t, false, nil).HiddenIn(place{}); shown(".env") || !shown(tempPrefix+"x") {
		t.Error("without hide, a listing shows credentials and never realm's temps")
	}
}

// statOf is the backing stat of name, as the mount's dirfd reads it.
func statOf(t *testing.T, tg *testGate, name string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := dirfd.Lstat(tg.RootFd, name, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// TestNewModeDropsSetID: a new object's set-ID bits outside the allowlist
// are dropped, audited PRIVILEGE_DENIED with no errno, and the object is
// made; a directory keeps its set-group-ID bit.
func TestNewModeDropsSetID(t *testing.T) {
	tg := newTestGate(t, false, nil)
	ctx := context.Background() // no caller: umask 0
	if got := tg.NewMode(ctx, "create", place{}, tg.RootFd, "f", syscall.S_IFREG, 0o4755); got != 0o755 {
		t.Errorf("create 4755: mode %o, want 755", got)
	}
	tg.log.wantLines(t, "create f PRIVILEGE_DENIED  privilege:set-id")
	if got := tg.NewMode(ctx, "mkdir", place{}, tg.RootFd, "d", syscall.S_IFDIR, 0o2775); got != 0o2775 {
		t.Errorf("mkdir 2775: mode %o, want 2775", got)
	}
	tg.log.wantLines(t)
	if errno := tg.DenyChmod(ctx, place{}, syscall.S_IFREG, 0o6755); errno != syscall.EPERM {
		t.Errorf("chmod 6755 of a file: %v, want EPERM", errno)
	}
	tg.log.wantLines(t, "setattr  PRIVILEGE_DENIED EPERM privilege:set-id")
}

// TestDescriptorBound: an owner holding its bound of handles is refused
// (EMFILE), audited once per burst, while another owner is not; a release
// lets it open again, and its next refusal is a new burst.
func TestDescriptorBound(t *testing.T) {
	tg := newTestGate(t, false, func(g *Gate) { g.Fds.SetBounds(2, 0) })
	a, b := callerCtx(100), callerCtx(200)
	ownerA := locks.Owner("pid:100")
	for i := range uint64(2) {
		if errno := tg.AdmitOpen(a, "", "open", place{}, "f", false); errno != 0 {
			t.Fatalf("open %d of owner A below its bound: %v", i, errno)
		}
		tg.Fds.Opened(fdbudget.Handle{Fh: i}, ownerA)
	}
	for range 3 {
		if errno := tg.AdmitOpen(a, "", "open", place{}, "f", false); errno != syscall.EMFILE {
			t.Errorf("owner A past its bound: %v, want EMFILE", errno)
		}
	}
	if errno := tg.AdmitOpen(b, "", "open", place{}, "f", false); errno != 0 {
		t.Errorf("owner B while A is at its bound: %v", errno)
	}
	tg.log.wantLines(t, "open f RESOURCE_LIMIT EMFILE resource:max-fds")
	tg.Fds.Released(fdbudget.Handle{Fh: 0})
	tg.Fds.Released(fdbudget.Handle{Dir: true, Fh: 1}) // another kind of handle: not A's
	if errno := tg.AdmitOpen(a, "", "open", place{}, "f", false); errno != 0 {
		t.Errorf("owner A after a release: %v", errno)
	}
	tg.Fds.Opened(fdbudget.Handle{Fh: 0}, ownerA)
	if errno := tg.AdmitOpen(a, "", "opendir", place{dir: "d"}, "", false); errno != syscall.EMFILE {
		t.Errorf("owner A at its bound again: %v, want EMFILE", errno)
	}
	tg.log.wantLines(t, "opendir d RESOURCE_LIMIT EMFILE resource:max-fds")
	// A write open may take a write in progress too: more than one left.
	tg.Fds.Released(fdbudget.Handle{Fh: 0})
	if errno := tg.AdmitOpen(b, "", "open", place{}, "g", true); errno != syscall.EMFILE {
		t.Errorf("a write open of owner B with room for one handle: %v, want EMFILE", errno)
	}
}

// TestSweep: until the mount-time scan has run, an rmdir's sweep removes
// the temps a crash left, never one this mount is using nor a name that
// is no temp; the scan removes the crash's temps everywhere, and a sweep
// after it removes nothing.
func TestSweep(t *testing.T) {
	tg := newTestGate(t, false, nil)
	for _, p := range []string{"crashed/" + tempPrefix + "1", "busy/" + tempPrefix + "2", "busy/keep", "deep/a/" + tempPrefix + "3", "late/" + tempPrefix + "4"} {
		tg.write(t, p)
	}
	tg.own[tempPrefix+"2"] = true
	if !tg.SweepBeforeRmdir(tg.RootFd, "crashed") {
		t.Error("the sweep of crashed removed nothing")
	}
	if tg.SweepBeforeRmdir(tg.RootFd, "busy") {
		t.Error("the sweep of busy removed a temp in use")
	}
	if res := tg.Scan(); res.Err != nil {
		t.Fatal(res.Err)
	}
	tg.write(t, "late/"+tempPrefix+"5")
	if tg.SweepBeforeRmdir(tg.RootFd, "late") {
		t.Error("a sweep after the scan removed a temp: one left then is in use")
	}
	for p, want := range map[string]bool{
		"crashed/" + tempPrefix + "1": false, "busy/" + tempPrefix + "2": true, "busy/keep": true,
		"deep/a/" + tempPrefix + "3": false, "late/" + tempPrefix + "4": false, "late/" + tempPrefix + "5": true,
	} {
		_, err := os.Lstat(filepath.Join(tg.backing, p))
		if got := err == nil; got != want {
			t.Errorf("%s there: %v, want %v", p, got, want)
		}
	}
}
