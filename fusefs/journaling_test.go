package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/undo"
	"github.com/realm-dev/realm/fusefs/nameops"
	"github.com/realm-dev/realm/fusefs/templive"
	"github.com/realm-dev/realm/fusefs/writeengine"
)

// newJournalFS is newTestFS with a journal in BACKING/.realm-journal.
func newJournalFS(t *testing.T) (*testFS, *journal.Journal) {
	t.Helper()
	tf := newTestFS(t, nil)
	j, err := journal.Open(tf.rootFd, journal.DefaultDir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tf.opts.Journal, tf.journal.J = j, j
	t.Cleanup(func() { j.Close() })
	return tf, j
}

// records is the journal's records, ended.
func records(t *testing.T, j *journal.Journal) []journal.Record {
	t.Helper()
	recs, err := j.Records(journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ino is the inode number of BACKING's name.
func (tf *testFS) ino(t *testing.T, name string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(tf.backing, name), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// keptContent is what the journal keeps for change seq.
func keptContent(t *testing.T, j *journal.Journal, seq uint64) string {
	t.Helper()
	fd, err := j.OpenKept(seq)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(fd)
	rfd, err := dirfd.Reopen(fd, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(rfd), "kept")
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := f.Read(b)
	return string(b[:n])
}

// TestJournalHidden: the journal's directory is never visible nor
// reachable through the mount: lookup, create, mkdir, rename onto it,
// symlink through it, and the root's listing.
func TestJournalHidden(t *testing.T) {
	tf, _ := newJournalFS(t)
	tf.write(t, "f", "x")
	ctx := as(1)
	var out fuse.EntryOut
	if _, errno := tf.root.Lookup(ctx, journal.DirName, &out); errno != syscall.ENOENT {
		t.Errorf("lookup: %v, want ENOENT", errno)
	}
	if _, _, _, errno := tf.root.Create(ctx, journal.DirName, uint32(os.O_WRONLY|os.O_CREATE|os.O_EXCL), 0o644, &out); errno != syscall.EACCES {
		t.Errorf("create: %v, want EACCES", errno)
	}
	if _, errno := tf.root.Mkdir(ctx, journal.DirName, 0o755, &out); errno != syscall.EACCES {
		t.Errorf("mkdir: %v, want EACCES", errno)
	}
	if errno := tf.root.Rename(ctx, "f", tf.root, journal.DirName, 0); errno != syscall.EACCES {
		t.Errorf("rename onto it: %v, want EACCES", errno)
	}
	if errno := tf.root.Rename(ctx, journal.DirName, tf.root, "g", 0); errno != syscall.ENOENT {
		t.Errorf("rename from it: %v, want ENOENT", errno)
	}
	if errno := tf.root.Unlink(ctx, journal.DirName); errno != syscall.ENOENT {
		t.Errorf("unlink: %v, want ENOENT", errno)
	}
	for _, target := range []string{journal.DirName, journal.DirName + "/kept", "./" + journal.DirName + "/log"} {
		if _, errno := tf.root.Symlink(ctx, target, "l", &out); errno != syscall.EACCES {
			t.Errorf("symlink to %q: %v, want EACCES", target, errno)
		}
	}
	if !tf.gate.HiddenIn(tf.root)(journal.DirName) {
		t.Errorf("the root's listing shows %s", journal.DirName)
	}
	if _, err := os.Stat(filepath.Join(tf.backing, journal.DirName, "log")); err != nil {
		t.Errorf("the journal is gone: %v", err)
	}
}

// TestJournalScanSkips: the mount-time scan and its sweep of crash temps
// do not enter the journal's directory: a temp-named file in it is not
// handed to the sweep.
func TestJournalScanSkips(t *testing.T) {
	tf, _ := newJournalFS(t)
	p := filepath.Join(tf.backing, journal.DirName, TempPrefix+"x")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var g guard.Guard
	g.Policy = tf.guard.Policy
	g.StartScan()
	var swept []string
	res := g.Scan(tf.rootFd, hiddenName, func(_ int, name string) bool {
		if name != templive.Dir { // the marks of live daemons: not entered either
			swept = append(swept, name)
		}
		return false
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(swept) != 1 || swept[0] != journal.DirName {
		t.Errorf("the scan handed %q to the sweep, want only %s", swept, journal.DirName)
	}
}

// TestJournalNameOps: each name op leaves its record.
func TestJournalNameOps(t *testing.T) {
	tf, j := newJournalFS(t)
	ctx := as(1)
	tf.write(t, "a", "old a")
	tf.write(t, "b", "old b")
	var out fuse.EntryOut
	if _, errno := tf.root.Mkdir(ctx, "d", 0o755, &out); errno != 0 {
		t.Fatal(errno)
	}
	dIno := tf.ino(t, "d")
	if _, errno := tf.root.Symlink(ctx, "a", "s", &out); errno != 0 {
		t.Fatal(errno)
	}
	sIno := tf.ino(t, "s")
	aIno, bIno := tf.ino(t, "a"), tf.ino(t, "b")
	if _, errno := tf.root.Link(ctx, tf.lookup(t, "a"), "a2", &out); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.root.Rename(ctx, "a", tf.root, "b", 0); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.root.Unlink(ctx, "a2"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.root.Rmdir(ctx, "d"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.root.Unlink(ctx, "nothing"); errno != syscall.ENOENT {
		t.Fatalf("unlink of nothing: %v", errno)
	}
	var st syscall.Stat_t
	if _, fh, _, errno := tf.root.Create(ctx, "c", uint32(os.O_WRONLY|os.O_CREATE|os.O_EXCL), 0o644, &out); errno != 0 {
		t.Fatal(errno)
	} else if rh, ok := fh.(interface {
		Release(context.Context) syscall.Errno
	}); ok {
		rh.Release(ctx)
	}
	syscall.Lstat(filepath.Join(tf.backing, "c"), &st)
	recs := records(t, j)
	want := []struct {
		op       journal.Op
		path, to string
		before   uint64 // Before's ino; 0: none
		replaced uint64
		after    uint64
		kept     string // "-": nothing kept
	}{
		{journal.OpMkdir, "d", "", 0, 0, dIno, "-"},
		{journal.OpSymlink, "s", "", 0, 0, sIno, "-"},
		{journal.OpLink, "a", "a2", aIno, 0, 0, "-"},
		{journal.OpRename, "a", "b", aIno, bIno, 0, "old b"},
		{journal.OpUnlink, "a2", "", aIno, 0, 0, "old a"},
		{journal.OpRmdir, "d", "", dIno, 0, 0, ""},
		{journal.OpCreate, "c", "", 0, 0, st.Ino, "-"},
	}
	if len(recs) != len(want) {
		for _, r := range recs {
			t.Logf("%+v", r)
		}
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Op != w.op || r.Path != w.path || r.To != w.to || r.End != journal.Done || r.Owner != "pid:1" {
			t.Errorf("record %d: %s %q→%q %s owner %s, want %s %q→%q done pid:1", i, r.Op, r.Path, r.To, r.End, r.Owner, w.op, w.path, w.to)
		}
		if w.before != 0 && (r.Before == nil || r.Before.Ino != w.before) {
			t.Errorf("record %d (%s): before %+v, want ino %d", i, r.Op, r.Before, w.before)
		}
		if w.replaced != 0 && (r.Replaced == nil || r.Replaced.Ino != w.replaced) {
			t.Errorf("record %d (%s): replaced %+v, want ino %d", i, r.Op, r.Replaced, w.replaced)
		}
		if w.after != 0 && (r.After == nil || r.After.Ino != w.after) {
			t.Errorf("record %d (%s): after %+v, want ino %d", i, r.Op, r.After, w.after)
		}
		if r.Kept != (w.kept != "-") {
			t.Errorf("record %d (%s): kept %v", i, r.Op, r.Kept)
		} else if r.Kept && w.op != journal.OpRmdir {
			if got := keptContent(t, j, r.Seq); got != w.kept {
				t.Errorf("record %d (%s): kept %q, want %q", i, r.Op, got, w.kept)
			}
		}
	}
	if _, err := dirfd.OpenDir(tf.rootFd, "d"); err == nil {
		t.Error("d is still there")
	}
}

// TestJournalRewriteAndAppend: a commit's rename records a rewrite, the
// old file kept by link; appends in place record one append, with the
// size before them; a chmod records its before.
func TestJournalRewriteAndAppend(t *testing.T) {
	tf, j := newJournalFS(t)
	h := tf.writing(t, "old", uint32(os.O_WRONLY|os.O_TRUNC), "new")
	oldIno := tf.ino(t, "f")
	h.Release(as(1))
	newIno := tf.ino(t, "f")
	tf.wantContent(t, "f", "new", "after the commit")
	a := tf.openWrite(t, 1, "f", uint32(os.O_WRONLY|os.O_APPEND))
	for _, s := range []string{"+1", "+2"} {
		if n, errno := a.Write(as(1), []byte(s), 0); errno != 0 || int(n) != len(s) {
			t.Fatalf("append: %d, %v", n, errno)
		}
	}
	a.Release(as(1))
	tf.wantContent(t, "f", "new+1+2", "after the appends")
	in := &fuse.SetAttrIn{}
	in.Valid, in.Mode = fuse.FATTR_MODE, 0o600
	if errno := tf.lookup(t, "f").Setattr(as(1), nil, in, &fuse.AttrOut{}); errno != 0 {
		t.Fatal(errno)
	}
	recs := records(t, j)
	var got []journal.Op
	for _, r := range recs {
		got = append(got, r.Op)
	}
	if len(recs) != 3 || got[0] != journal.OpRewrite || got[1] != journal.OpAppend || got[2] != journal.OpChmod {
		t.Fatalf("records %v, want rewrite, append, chmod", got)
	}
	rw := recs[0]
	if rw.Path != "f" || rw.Before == nil || rw.Before.Ino != oldIno || rw.After == nil || rw.After.Ino != newIno || !rw.Kept || rw.End != journal.Done {
		t.Errorf("rewrite: %+v (before %+v, after %+v), want f %d→%d kept done", rw, rw.Before, rw.After, oldIno, newIno)
	}
	if got := keptContent(t, j, rw.Seq); got != "old" {
		t.Errorf("rewrite kept %q, want \"old\"", got)
	}
	if ap := recs[1]; ap.Before == nil || ap.Before.Size != 3 || ap.Kept || ap.End != journal.Done {
		t.Errorf("append: %+v (before %+v), want size 3 before, nothing kept", ap, ap.Before)
	}
	if ch := recs[2]; ch.Before == nil || ch.Before.Mode&0o777 != 0o644 || ch.Path != "f" {
		t.Errorf("chmod: %+v (before %+v), want mode 0644 before", ch, ch.Before)
	}
}

// TestJournalFailedRefuses: a change the journal cannot record is not
// made: EIO, audited journal:failed.
func TestJournalFailedRefuses(t *testing.T) {
	tf, j := newJournalFS(t)
	j.Close()
	var out fuse.EntryOut
	if _, errno := tf.root.Mkdir(as(1), "d", 0o755, &out); errno != syscall.EIO {
		t.Errorf("mkdir with the journal closed: %v, want EIO", errno)
	}
	if _, err := os.Stat(filepath.Join(tf.backing, "d")); !os.IsNotExist(err) {
		t.Errorf("d made without its record: %v", err)
	}
	tf.write(t, "f", "x")
	if errno := tf.root.Unlink(as(1), "f"); errno != syscall.EIO {
		t.Errorf("unlink with the journal closed: %v, want EIO", errno)
	}
	tf.wantContent(t, "f", "x", "after the refused unlink")
	h := tf.writing(t, "old", uint32(os.O_WRONLY|os.O_TRUNC), "new")
	h.Flush(as(1))
	h.Release(as(1))
	tf.wantContent(t, "f", "old", "after the refused commit")
	tf.wantAudit(t, "mkdir JOURNAL_FAILED EIO", "unlink JOURNAL_FAILED EIO", "commit JOURNAL_FAILED EIO")
	if !strings.Contains(tf.logs.String(), "journal: a change could not be recorded") {
		t.Errorf("the failure is not logged:\n%s", tf.logs.String())
	}
}

// TestJournalRenameOntoItself: a rename onto another name of the same
// file changes nothing, and keeps nothing: its nlink stays.
func TestJournalRenameOntoItself(t *testing.T) {
	tf, j := newJournalFS(t)
	tf.write(t, "a", "x")
	if err := os.Link(filepath.Join(tf.backing, "a"), filepath.Join(tf.backing, "b")); err != nil {
		t.Fatal(err)
	}
	if errno := tf.root.Rename(as(1), "a", tf.root, "b", 0); errno != 0 {
		t.Fatal(errno)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(tf.backing, "b"), &st); err != nil || st.Nlink != 2 {
		t.Errorf("nlink of b: %d (%v), want 2", st.Nlink, err)
	}
	if recs := records(t, j); len(recs) != 1 || recs[0].Op != journal.OpRename || recs[0].Kept {
		t.Errorf("records %+v, want one rename keeping nothing", recs)
	}
}

// TestUndoTempsAreHidden: undo stages a file under the write engine's
// temp prefix, so that the mount hides it and its sweep removes one a
// crash left.
func TestUndoTempsAreHidden(t *testing.T) {
	if undo.TempPrefix != writeengine.TempPrefix || !hiddenName(undo.TempPrefix+"undo-1") {
		t.Errorf("undo.TempPrefix %q, writeengine.TempPrefix %q: undo's temps must be the engine's", undo.TempPrefix, writeengine.TempPrefix)
	}
}

// dirOfTwoFiles makes directory d holding files f and g, and returns its
// node and fd (pinned until the test ends).
func dirOfTwoFiles(t *testing.T, tf *testFS, ctx context.Context) (*Node, int) {
	t.Helper()
	var out fuse.EntryOut
	if _, errno := tf.root.Mkdir(ctx, "d", 0o755, &out); errno != 0 {
		t.Fatal(errno)
	}
	tf.write(t, "d/f", "f")
	tf.write(t, "d/g", "g")
	d := tf.lookup(t, "d")
	pfd, done, errno := d.dirFd(ctx)
	if errno != 0 {
		t.Fatal(errno)
	}
	t.Cleanup(done)
	return d, pfd
}

// TestRemoveDirPath: an unlink takes its directory's path from the check
// of the directory's fd (nameops.DirPath) only while no directory has been
// renamed through the mount since the check: after a rename, its record
// has the path the kernel gives now.
func TestRemoveDirPath(t *testing.T) {
	tf, j := newJournalFS(t)
	ctx := as(1)
	d, pfd := dirOfTwoFiles(t, tf, ctx)
	// The path read with the count as it is now stands, unread again.
	at := nameops.DirPath{Rel: "as-read", Gen: tf.nameOps.PathGen(), Known: true}
	if errno := tf.nameOps.Remove(ctx, "unlink", d, pfd, at, "f", 0); errno != 0 {
		t.Fatal(errno)
	}
	// A directory renamed since the read: the kernel's path.
	if errno := tf.root.Rename(ctx, "d", tf.root, "e", 0); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.nameOps.Remove(ctx, "unlink", d, pfd, at, "g", 0); errno != 0 {
		t.Fatal(errno)
	}
	var paths []string
	for _, r := range records(t, j) {
		if r.Op == journal.OpUnlink {
			paths = append(paths, r.Path)
		}
	}
	if want := []string{"as-read/f", "e/g"}; !slices.Equal(paths, want) {
		t.Errorf("the unlinks' paths: %q, want %q", paths, want)
	}
}

// TestRenameDirPath: a rename takes its directories' paths from the
// checks of their fds (nameops.DirPath) only while no directory has been
// renamed through the mount since the checks: after a rename, its record
// has the paths the kernel gives now.
func TestRenameDirPath(t *testing.T) {
	tf, j := newJournalFS(t)
	ctx := as(1)
	d, pfd := dirOfTwoFiles(t, tf, ctx)
	// The paths read with the count as it is now stand, unread again.
	at := nameops.DirPath{Rel: "as-read", Gen: tf.nameOps.PathGen(), Known: true}
	if errno := tf.nameOps.Rename(ctx, d, pfd, at, "f", d, pfd, at, "f2", 0); errno != 0 {
		t.Fatal(errno)
	}
	// A directory renamed since the reads: the kernel's paths.
	if errno := tf.root.Rename(ctx, "d", tf.root, "e", 0); errno != 0 {
		t.Fatal(errno)
	}
	if errno := tf.nameOps.Rename(ctx, d, pfd, at, "g", d, pfd, at, "g2", 0); errno != 0 {
		t.Fatal(errno)
	}
	var paths []string
	for _, r := range records(t, j) {
		if r.Op == journal.OpRename && r.Path != "d" {
			paths = append(paths, r.Path+" -> "+r.To)
		}
	}
	if want := []string{"as-read/f -> as-read/f2", "e/g -> e/g2"}; !slices.Equal(paths, want) {
		t.Errorf("the renames' paths: %q, want %q", paths, want)
	}
}
