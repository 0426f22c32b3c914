package writeengine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// The engine without a mount: a fake Host over a real temp directory, so
// that the engine's commits are tested as the package they are, with no
// go-fuse and no fusefs. fusefs's tests drive it through the adapter.

// fakeNode stands for the adapter's node.
type fakeNode struct{ name string }

// fakeHost records what the engine asked of the mount.
type fakeHost struct {
	mu        sync.Mutex
	logs      []string
	audits    []string // "op code"
	causes    []string // each audit line's cause
	replaced  int      // commits that rekeyed nodes
	published int      // unpublished files published, made real or gone
	charged   int      // writes charged and not released
	made      int      // changes run as the mount's own of a made file
}

func (h *fakeHost) Logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, fmt.Sprintf(format, args...))
}
func (h *fakeHost) Debugf(format string, args ...any) { h.Logf(format, args...) }
func (h *fakeHost) Audit(_ context.Context, op, _ string, code errcode.Code, _ syscall.Errno, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audits = append(h.audits, op+" "+string(code))
	h.causes = append(h.causes, fmt.Sprint(cause))
}
func (h *fakeHost) RelPath(_ *fakeNode, name string) string { return name }
func (h *fakeHost) LockNames() func()                       { return func() {} }
func (h *fakeHost) LockCommit() func()                      { return func() {} }
func (h *fakeHost) DenyCommit(context.Context, *Write[*fakeNode]) syscall.Errno {
	return 0
}
func (h *fakeHost) Conflicted(context.Context, *fakeNode, string) syscall.Errno {
	return syscall.EBUSY
}
func (h *fakeHost) OwnMadeChange(_ []int, change func() error) error {
	h.mu.Lock()
	h.made++
	h.mu.Unlock()
	return change()
}
func (h *fakeHost) Child(*fakeNode, string) *fakeNode { return nil }
func (h *fakeHost) Replaced(nodes []*fakeNode, _ locks.Key, _, _ FileID, _ *unix.Stat_t) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.replaced++
}

func (h *fakeHost) NotifyEntry(*fakeNode, string) {}
func (h *fakeHost) NotifyInode(*fakeNode)         {}
func (h *fakeHost) ChargeWrite(locks.Owner) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.charged++
	return true
}
func (h *fakeHost) ReleaseWrite(locks.Owner) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.charged--
}

// procFacts is what a close finds of its thread, as a test sets it: by
// default the closing thread is its opener's, holds no other descriptor
// of the file and is not exiting.
type procFacts struct {
	stranger bool  // the closing thread is not of the opener
	others   int   // its other descriptors of the file
	err      error // the scan's failure
	signal   int   // the signal killing it (0: not exiting)
	// writer is what the last writer is doing, its user time, and
	// where its system call is.
	writer  procinfo.WriterState
	ticks   uint64
	syscall procinfo.SyscallState
}

// fakeProcs is Processes over procFacts; it counts the samples taken of
// the writer (asked) and keeps what the last scan looked for (like).
type fakeProcs struct {
	mu    sync.Mutex
	facts procFacts
	asked int
	like  procinfo.SameOpen
	// sampled, if set, hears each sample of the writer (without waiting):
	// a test acts on the writer once a close has begun to watch it.
	sampled chan struct{}
}

func (p *fakeProcs) IsThreadOf(tgid, tid uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.facts.stranger
}

func (p *fakeProcs) Descriptors(tid uint32, inos []uint64, dev uint64, like procinfo.SameOpen) (procinfo.Closing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.like = like
	return procinfo.Closing{Others: p.facts.others, Exiting: p.facts.signal != 0}, p.facts.err
}

func (p *fakeProcs) ExitSignal(tid uint32) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.facts.signal, nil
}

func (p *fakeProcs) WriterState(tid uint32) (procinfo.WriterSample, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	select {
	case p.sampled <- struct{}{}:
	default:
	}
	return procinfo.WriterSample{State: p.facts.writer, UserTicks: p.facts.ticks, Syscall: p.facts.syscall}, nil
}

// set changes what the next closes find.
func (p *fakeProcs) set(fn func(f *procFacts)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(&p.facts)
}

// engineDir is an engine over a temp directory holding file f.
type engineDir struct {
	g     *Engine[*fakeNode]
	host  *fakeHost
	procs *fakeProcs
	path  string // the directory
	dfd   int    // its O_PATH descriptor
}

func newEngineDir(t *testing.T, content string) *engineDir {
	t.Helper()
	d := &engineDir{host: &fakeHost{}, procs: &fakeProcs{}, path: t.TempDir()}
	if err := os.WriteFile(filepath.Join(d.path, "f"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := dirfd.OpenRoot(d.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirfd.Close(fd) })
	d.dfd = fd
	d.g = New[*fakeNode](d.host, locks.NewTable(), Config{Durability: DurabilityFull, Procs: d.procs})
	t.Cleanup(func() { d.host.noViolation(t) })
	return d
}

// noViolation fails t if the engine logged an event the write protocol
// rejected (protocolEnded).
func (h *fakeHost) noViolation(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.logs {
		if strings.Contains(l, writeproto.Marker) {
			t.Errorf("the write protocol rejected an event: %s", l)
		}
	}
}

// open opens f for owner with flags (of the O_* bits: O_TRUNC, O_APPEND)
// as a write open does: the lock, the write, the handle's File.
func (d *engineDir) open(t *testing.T, owner locks.Owner, flags int) *File[*fakeNode] {
	t.Helper()
	f, err := d.openAs(owner, "f", flags, 1)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// openAs opens name for owner with flags by the process opener, as a
// write open does.
func (d *engineDir) openAs(owner locks.Owner, name string, flags int, opener uint32) (*File[*fakeNode], error) {
	base, err := dirfd.Open(d.dfd, name, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(base, &st); err != nil {
		dirfd.Close(base)
		return nil, err
	}
	mode := locks.Write
	if flags&unix.O_APPEND != 0 && flags&unix.O_TRUNC == 0 {
		mode = locks.Append
	}
	lease, err := d.g.table.AcquireMode(locks.KeyOf(&st), owner, mode)
	if err != nil {
		dirfd.Close(base)
		return nil, err
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	w, again, err := d.g.Join(e, lease, owner, &fakeNode{name}, base, &fakeNode{"."}, d.dfd, name, &st, false)
	if err != nil || again {
		return nil, fmt.Errorf("join: %v (again %v)", err, again)
	}
	if flags&unix.O_ACCMODE == unix.O_RDONLY {
		flags |= unix.O_WRONLY
	}
	return w.Open(context.Background(), lease, w.Node(), 1, uint32(flags), opener)
}

// close closes f as its opener's last descriptor (FLUSH by thread 1),
// then releases it (RELEASE); it returns the close's errno.
func (d *engineDir) close(f *File[*fakeNode]) syscall.Errno {
	ctx := context.Background()
	errno := f.Flush(ctx, 1)
	f.Release(ctx)
	return errno
}

// closedClean closes f (an errno is fatal), then checks that the file
// holds content and nothing is left beside it.
func (d *engineDir) closedClean(t *testing.T, f *File[*fakeNode], content, when string) {
	t.Helper()
	if errno := d.close(f); errno != 0 {
		t.Fatalf("%s: close = %v", when, errno)
	}
	d.want(t, "f", content, when)
	if got := d.others(t); len(got) != 0 {
		t.Errorf("%s: left beside the file: %q", when, got)
	}
}

// write writes data at off through f as thread 1 (an append, if appends).
func (d *engineDir) write(t *testing.T, f *File[*fakeNode], appends bool, data string, off int64) {
	t.Helper()
	var flags uint32
	if appends {
		flags = unix.O_APPEND
	}
	if n, errno := f.Write(context.Background(), 1, flags, true, []byte(data), off); errno != 0 || n != len(data) {
		t.Fatalf("write %q: %d, %v", data, n, errno)
	}
}

func (d *engineDir) want(t *testing.T, name, content, when string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.path, name))
	if err != nil || string(b) != content {
		t.Errorf("%s: %s is %q (%v), want %q", when, name, b, err, content)
	}
}

// others lists the directory but f.
func (d *engineDir) others(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(d.path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != "f" {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestEngineCommitsByRename: a truncating rewrite lands at the opener's
// close by a rename, the nodes are rekeyed through the host, and no temp
// nor charge is left.
func TestEngineCommitsByRename(t *testing.T) {
	d := newEngineDir(t, "old content")
	f := d.open(t, "a", unix.O_TRUNC)
	d.want(t, "f", "old content", "before the commit")
	d.write(t, f, false, "new", 0)
	d.want(t, "f", "old content", "before the close")
	if errno := d.close(f); errno != 0 {
		t.Fatalf("close = %v", errno)
	}
	d.want(t, "f", "new", "after the close")
	if got := d.others(t); len(got) != 0 {
		t.Errorf("left beside the file: %q", got)
	}
	if d.host.replaced != 1 || d.host.charged != 0 {
		t.Errorf("host: %d replaced (want 1), %d charged (want 0)", d.host.replaced, d.host.charged)
	}
	if d.g.table.Len() != 0 {
		t.Errorf("the lock table holds %d entries after the release", d.g.table.Len())
	}
}

// TestEngineKeepsAConflictCopy: a file changed behind the engine since the
// write began keeps that change; the writer's bytes are kept beside it,
// and the close answers what the host says of a conflict.
func TestEngineKeepsAConflictCopy(t *testing.T) {
	d := newEngineDir(t, "old content")
	f := d.open(t, "a", unix.O_RDWR)
	d.write(t, f, false, "NEW", 0)
	if err := os.WriteFile(filepath.Join(d.path, "f"), []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if errno := d.close(f); errno != syscall.EBUSY {
		t.Errorf("close = %v, want the host's EBUSY", errno)
	}
	d.want(t, "f", "theirs", "after the conflict")
	got := d.others(t)
	if len(got) != 1 || !strings.HasPrefix(got[0], "f.realm-conflict-") {
		t.Fatalf("beside the file: %q, want one conflict copy", got)
	}
	d.want(t, got[0], "NEW content", "the conflict copy")
}

// TestEngineAppendsInPlace: an append with nothing uncommitted goes into
// the file at once, with no temp; the lock stays on the file.
func TestEngineAppendsInPlace(t *testing.T) {
	d := newEngineDir(t, "a\n")
	f := d.open(t, "a", unix.O_APPEND)
	d.write(t, f, true, "b\n", 0)
	d.want(t, "f", "a\nb\n", "right after the append")
	w := f.Pending()
	w.Entry().Lock()
	uncommitted := w.Uncommitted()
	w.Entry().Unlock()
	if uncommitted {
		t.Error("an append in place made a temp")
	}
	d.closedClean(t, f, "a\nb\n", "after the close")
}

// TestEngineFailedWriteNeverCommits: a change that failed for want of
// space leaves the temp short: the commit refuses it (EIO, the audit's
// WRITE_NOT_ATOMIC) and the file is as it was.
func TestEngineFailedWriteNeverCommits(t *testing.T) {
	d := newEngineDir(t, "old content")
	f := d.open(t, "a", unix.O_RDWR)
	f.Change(context.Background(), func(int) syscall.Errno { return syscall.ENOSPC })
	if errno := d.close(f); errno != syscall.EIO {
		t.Errorf("close = %v, want EIO", errno)
	}
	d.want(t, "f", "old content", "after the failed commit")
	if got := d.others(t); len(got) != 0 {
		t.Errorf("left beside the file: %q", got)
	}
	if len(d.host.audits) != 1 || d.host.audits[0] != "commit:after-write "+string(errcode.WriteNotAtomic) {
		t.Errorf("audit lines %q", d.host.audits)
	}
}

// TestEngineFollowsARename: a rename through the mount moves the write
// with its file (BeginMoves, the rename, Renamed, the end of the marks);
// a commit point waits out the marks (waitMoves) and lands at the new
// name.
func TestEngineFollowsARename(t *testing.T) {
	d := newEngineDir(t, "old content")
	f := d.open(t, "a", unix.O_TRUNC)
	d.write(t, f, false, "new", 0)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(d.path, "f"), &st); err != nil {
		t.Fatal(err)
	}
	end := d.g.BeginMoves([]locks.Key{locks.KeyOf(&st)})
	waited := make(chan struct{})
	w := f.Pending()
	go func() {
		w.Entry().Lock()
		w.waitMoves()
		w.Entry().Unlock()
		close(waited)
	}()
	if err := os.Rename(filepath.Join(d.path, "f"), filepath.Join(d.path, "g")); err != nil {
		t.Fatal(err)
	}
	d.g.Renamed(locks.KeyOf(&st), &fakeNode{"."}, d.dfd, "g")
	time.Sleep(10 * time.Millisecond) // time for the commit point to go on, were it to
	select {
	case <-waited:
		t.Fatal("a commit point went on while the rename's mark was on its file")
	default:
	}
	end()
	<-waited
	if errno := d.close(f); errno != 0 {
		t.Fatalf("close = %v", errno)
	}
	d.want(t, "g", "new", "after the close")
	if got := d.others(t); len(got) != 1 || got[0] != "g" {
		t.Errorf("the directory holds %q, want only g", got)
	}
}

func (h *fakeHost) Journaling() bool                 { return false }
func (h *fakeHost) KeptLinks(dev, ino uint64) uint32 { return 0 }

func (h *fakeHost) JournalChange(context.Context, journal.Op, locks.Owner, string, *unix.Stat_t, *journal.ID, int) (func(error), syscall.Errno) {
	return nil, 0
}
func (h *fakeHost) JournalCreate(context.Context, locks.Owner, string) (func(error, *journal.ID), syscall.Errno) {
	return nil, 0
}
func (h *fakeHost) Published(*fakeNode, *fakeNode, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.published++
}

// rewriteBesideAppender opens "old|" for appending by owners a and b, and
// has a rewrite it through its appending handle (an ftruncate, then "a|"
// into its temp): a's close commits by a rename over the file b appends
// to in place.
func rewriteBesideAppender(t *testing.T) (d *engineDir, a, b *File[*fakeNode]) {
	t.Helper()
	d = newEngineDir(t, "old|")
	a = d.open(t, "a", unix.O_APPEND)
	b = d.open(t, "b", unix.O_APPEND)
	if errno := a.Truncate(context.Background(), 0); errno != 0 {
		t.Fatalf("ftruncate: %v", errno)
	}
	d.write(t, a, true, "a|", 0)
	return d, a, b
}

// TestEngineAppendWaitsForAnotherOwnersCommit: two owners append to one
// file, and A's ftruncate through its appending handle made a temp, which
// its close commits by a rename. B's append, asked while A's commit is
// between its look at the file and its rename, must not go into the file
// the rename replaces (lost with it, as TestModel seed 111242256013 found):
// it waits for the rename and lands in the file A put in place.
func TestEngineAppendWaitsForAnotherOwnersCommit(t *testing.T) {
	d, a, b := rewriteBesideAppender(t)
	ctx := context.Background()
	appended := make(chan syscall.Errno, 1)
	var once sync.Once
	d.g.cfg.FailAt = func(s Stage) bool {
		if s != StageBeforeRename {
			return false
		}
		once.Do(func() {
			if file := b.Pending().Entry().File(); file.TryRLock() {
				file.RUnlock()
				t.Error("another owner may append while a commit is between its look and its rename")
			}
			go func() {
				n, errno := b.Write(ctx, 1, unix.O_APPEND, true, []byte("b|"), 0)
				if errno == 0 && n != 2 {
					errno = syscall.EIO
				}
				appended <- errno
			}()
		})
		return false
	}
	if errno := d.close(a); errno != 0 {
		t.Fatalf("A's close = %v", errno)
	}
	if errno := <-appended; errno != 0 {
		t.Fatalf("B's append = %v", errno)
	}
	d.want(t, "f", "a|b|", "after A's commit and B's append")
	d.closedClean(t, b, "a|b|", "after B's close")
}

// TestEngineConflictNamesTheAppender: A's rewrite of a file B appends to
// meets B's append in place at its commit: the file keeps B's bytes, A's
// are kept beside it, and the daemon's log names B's appends as a cause,
// not only a change from outside.
func TestEngineConflictNamesTheAppender(t *testing.T) {
	d, a, b := rewriteBesideAppender(t)
	d.write(t, b, true, "b|", 0)
	d.want(t, "f", "old|b|", "after B's append in place")
	if errno := d.close(a); errno != syscall.EBUSY {
		t.Errorf("A's close = %v, want the host's EBUSY", errno)
	}
	d.want(t, "f", "old|b|", "after A's conflict")
	if got := d.others(t); len(got) != 1 || !strings.HasPrefix(got[0], "f.realm-conflict-") {
		t.Errorf("beside the file: %q, want one conflict copy", got)
	}
	d.host.mu.Lock()
	logs := strings.Join(d.host.logs, "\n")
	d.host.mu.Unlock()
	if !strings.Contains(logs, "another owner's appends (b)") {
		t.Errorf("the conflict's log line does not name B's appends:\n%s", logs)
	}
	if errno := d.close(b); errno != 0 {
		t.Fatalf("B's close = %v", errno)
	}
}
