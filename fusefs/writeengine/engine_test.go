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
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// The engine without a mount: a fake Host over a real temp directory, so
// that the engine's commits are tested as the package they are, with no
// go-fuse and no fusefs. fusefs's tests drive it through the adapter.

// fakeNode stands for the adapter's node.
type fakeNode struct{ name string }

// fakeHost records what the engine asked of the mount.
type fakeHost struct {
	mu       sync.Mutex
	logs     []string
	audits   []string // "op code"
	replaced int      // commits that rekeyed nodes
	charged  int      // writes charged and not released
	made     int      // changes run as the mount's own of a made file
}

func (h *fakeHost) Logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, fmt.Sprintf(format, args...))
}
func (h *fakeHost) Debugf(format string, args ...any) { h.Logf(format, args...) }
func (h *fakeHost) Audit(_ context.Context, op, _ string, code errcode.Code, _ syscall.Errno, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audits = append(h.audits, op+" "+string(code))
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
func (h *fakeHost) Quiet(int) bool                { return false }
func (h *fakeHost) Unquiet(int)                   {}
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

// engineDir is an engine over a temp directory holding file f.
type engineDir struct {
	g    *Engine[*fakeNode]
	host *fakeHost
	path string // the directory
	dfd  int    // its O_PATH descriptor
}

func newEngineDir(t *testing.T, content string) *engineDir {
	t.Helper()
	d := &engineDir{host: &fakeHost{}, path: t.TempDir()}
	if err := os.WriteFile(filepath.Join(d.path, "f"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := dirfd.OpenRoot(d.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirfd.Close(fd) })
	d.dfd = fd
	d.g = New[*fakeNode](d.host, locks.NewTable(), Config{Durability: DurabilityFull})
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
// as a write open does: the lock, the write, the handle.
func (d *engineDir) open(t *testing.T, owner locks.Owner, flags int) (*Write[*fakeNode], *Handle, *locks.Lease) {
	t.Helper()
	base, err := dirfd.Open(d.dfd, "f", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(base, &st); err != nil {
		t.Fatal(err)
	}
	mode := locks.Write
	if flags&unix.O_APPEND != 0 {
		mode = locks.Append
	}
	lease, err := d.g.table.AcquireMode(locks.KeyOf(&st), owner, mode)
	if err != nil {
		t.Fatal(err)
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	w, again, err := d.g.Join(e, lease, owner, &fakeNode{"f"}, base, &fakeNode{"."}, d.dfd, "f", &st, false)
	if err != nil || again {
		t.Fatalf("join: %v (again %v)", err, again)
	}
	h, err := w.Open(context.Background(), lease, Open{Write: true, Append: flags&unix.O_APPEND != 0,
		Truncate: flags&unix.O_TRUNC != 0, Opener: 1, Kind: uint32(unix.O_WRONLY | flags&unix.O_APPEND), Hold: lease}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w, h, lease
}

// close closes h as its opener's last descriptor (FLUSH), then releases
// it (RELEASE); it returns the close's errno.
func (d *engineDir) close(w *Write[*fakeNode], h *Handle, lease *locks.Lease) syscall.Errno {
	ctx := context.Background()
	w.Entry().Lock()
	defer w.Entry().Unlock()
	var errno syscall.Errno
	if _, may := w.FlushStart(h); may {
		w.WaitMoves()
		errno = w.Flush(ctx, h, FlushFacts{}, 1)
	}
	w.Release(ctx, h, 1, true, lease)
	return errno
}

func (d *engineDir) write(t *testing.T, w *Write[*fakeNode], h *Handle, appends bool, data string, off int64) {
	t.Helper()
	w.Entry().Lock()
	defer w.Entry().Unlock()
	if n, errno := w.WriteData(context.Background(), h, w.Node(), appends, []byte(data), off); errno != 0 || n != len(data) {
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
	w, h, lease := d.open(t, "a", unix.O_TRUNC)
	d.want(t, "f", "old content", "before the commit")
	d.write(t, w, h, false, "new", 0)
	d.want(t, "f", "old content", "before the close")
	if errno := d.close(w, h, lease); errno != 0 {
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
	w, h, lease := d.open(t, "a", unix.O_RDWR)
	d.write(t, w, h, false, "NEW", 0)
	if err := os.WriteFile(filepath.Join(d.path, "f"), []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if errno := d.close(w, h, lease); errno != syscall.EBUSY {
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
	w, h, lease := d.open(t, "a", unix.O_APPEND)
	d.write(t, w, h, true, "b\n", 0)
	d.want(t, "f", "a\nb\n", "right after the append")
	w.Entry().Lock()
	uncommitted := w.Uncommitted()
	w.Entry().Unlock()
	if uncommitted {
		t.Error("an append in place made a temp")
	}
	if errno := d.close(w, h, lease); errno != 0 {
		t.Fatalf("close = %v", errno)
	}
	d.want(t, "f", "a\nb\n", "after the close")
	if got := d.others(t); len(got) != 0 {
		t.Errorf("left beside the file: %q", got)
	}
}

// TestEngineFailedWriteNeverCommits: a change that failed for want of
// space leaves the temp short: the commit refuses it (EIO, the audit's
// WRITE_NOT_ATOMIC) and the file is as it was.
func TestEngineFailedWriteNeverCommits(t *testing.T) {
	d := newEngineDir(t, "old content")
	w, h, lease := d.open(t, "a", unix.O_RDWR)
	w.Entry().Lock()
	w.Change(h, func(int) syscall.Errno { return syscall.ENOSPC })
	w.Entry().Unlock()
	if errno := d.close(w, h, lease); errno != syscall.EIO {
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
// a commit point waits out the marks (WaitMoves) and lands at the new
// name.
func TestEngineFollowsARename(t *testing.T) {
	d := newEngineDir(t, "old content")
	w, h, lease := d.open(t, "a", unix.O_TRUNC)
	d.write(t, w, h, false, "new", 0)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(d.path, "f"), &st); err != nil {
		t.Fatal(err)
	}
	end := d.g.BeginMoves([]locks.Key{locks.KeyOf(&st)})
	waited := make(chan struct{})
	go func() {
		w.Entry().Lock()
		w.WaitMoves()
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
	if errno := d.close(w, h, lease); errno != 0 {
		t.Fatalf("close = %v", errno)
	}
	d.want(t, "g", "new", "after the close")
	if got := d.others(t); len(got) != 1 || got[0] != "g" {
		t.Errorf("the directory holds %q, want only g", got)
	}
}

// TestEngineKilledWriter: a writer killed before its close has its bytes
// committed where that tears nothing old (the file was empty), and kept
// as a recovery copy beside the file otherwise.
func TestEngineKilledWriter(t *testing.T) {
	for _, tc := range []struct {
		name, old, copy string
	}{
		{"empty file", "", ""},
		{"rewrite", "old content", "NEW content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDir(t, tc.old)
			w, h, lease := d.open(t, "a", unix.O_RDWR)
			d.write(t, w, h, false, "NEW", 0)
			w.Entry().Lock()
			if _, may := w.FlushStart(h); !may {
				t.Fatal("a killed writer's close may not commit")
			}
			w.Flush(context.Background(), h, FlushFacts{Signal: int(unix.SIGKILL)}, 1)
			w.Release(context.Background(), h, 1, true, lease)
			w.Entry().Unlock()
			got := d.others(t)
			if tc.copy == "" {
				d.want(t, "f", "NEW", "after its empty file's writer was killed")
				if len(got) != 0 {
					t.Errorf("beside the file: %q, want nothing", got)
				}
				return
			}
			d.want(t, "f", tc.old, "after its writer was killed")
			if len(got) != 1 || !strings.HasPrefix(got[0], "f.realm-recovered-") {
				t.Fatalf("beside the file: %q, want one recovery copy", got)
			}
			d.want(t, got[0], tc.copy, "the recovery copy")
		})
	}
}
