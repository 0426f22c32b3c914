package fusefs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// as is a request context from process pid, its own lock owner ("pid:N")
// on a mount without an owner resolver.
func as(pid uint32) context.Context {
	return fuse.NewContext(context.Background(), &fuse.Caller{Pid: pid})
}

// openWrite opens name in the root for writing, as process pid.
func (tf *testFS) openWrite(t testing.TB, pid uint32, name string, flags uint32) *writeHandle {
	t.Helper()
	fh, _, errno := tf.lookup(t, name).Open(as(pid), flags)
	if errno != 0 {
		t.Fatalf("open %q for writing: %v", name, errno)
	}
	return fh.(*writeHandle)
}

// writing puts f (content old) in the backing dir and returns the handle
// of process 1's write open of it (flags), through which data is written.
func (tf *testFS) writing(t testing.TB, old string, flags uint32, data string) *writeHandle {
	t.Helper()
	tf.write(t, "f", old)
	h := tf.openWrite(t, 1, "f", flags)
	writeAll(t, h, data)
	return h
}

// writeAll writes data at offset 0 through h.
func writeAll(t testing.TB, h openFile, data string) {
	t.Helper()
	if n, errno := h.Write(as(1), []byte(data), 0); errno != 0 || int(n) != len(data) {
		t.Fatalf("write = %d, %v", n, errno)
	}
}

func backingStat(t testing.TB, tf *testFS, name string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(tf.backing, name), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCommitReplaces follows one commit through its stages: the file keeps
// its old content until the commit, then is the new content under a new
// backing inode, with no temp left; the node and the lock move to the new
// identity, and the node keeps the inode number the kernel knows, which is
// now borrowed.
func TestCommitReplaces(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old content")
	old := backingStat(t, tf, "f")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "new")
	if got, _ := tf.read(t, "f"); got != "old content" {
		t.Fatalf("before the commit f = %q, want the old content", got)
	}
	if n := len(tf.temps(t)); n != 1 {
		t.Fatalf("%d temps while writing, want 1", n)
	}
	if errno := h.Fsync(as(1), 0); errno != 0 {
		t.Fatalf("fsync = %v", errno)
	}
	tf.wantContent(t, "f", "new", "after the commit")
	if tmp := tf.temps(t); len(tmp) != 0 {
		t.Errorf("temps left after the commit: %q", tmp)
	}
	now := backingStat(t, tf, "f")
	if now.Ino == old.Ino {
		t.Fatal("the commit did not replace the file (same inode)")
	}
	n := h.node
	if n.key() != locks.KeyOf(&now) {
		t.Errorf("node stands for %v, want the new file %v", n.key(), locks.KeyOf(&now))
	}
	if n.StableAttr().Ino != old.Ino {
		t.Errorf("node's inode number = %d, want the one the kernel knows, %d", n.StableAttr().Ino, old.Ino)
	}
	if !tf.isBorrowed(old.Ino) {
		t.Error("the old inode number is not marked borrowed")
	}
	if holder, held := tf.writeLocks.Holder(locks.KeyOf(&now)); !held || holder != "pid:1" {
		t.Errorf("lock of the new file: %q, %v; want held by pid:1", holder, held)
	}
	if _, held := tf.writeLocks.Holder(locks.KeyOf(&old)); held {
		t.Error("the lock table still holds the old identity")
	}
	h.Release(as(1))
	if l := tf.writeLocks.Len(); l != 0 {
		t.Errorf("%d lock entries after the last release, want 0", l)
	}
}

// TestCommitFailureLeavesFile: a commit that fails at any stage before its
// rename (an injected failure, or a write that failed short) removes the
// temp, leaves the file byte-identical, answers EIO, and writes one
// WRITE_NOT_ATOMIC line with the stage and cause.
func TestCommitFailureLeavesFile(t *testing.T) {
	tests := []struct {
		name       string
		stage      Stage // injected, "" for none
		shortWrite bool  // a write into the temp failed with ENOSPC
		wantOp     string
		wantCause  string
	}{
		{"after-write", StageAfterWrite, false, "commit:after-write", "injected failure"},
		{"after-fsync", StageAfterFsync, false, "commit:after-fsync", "injected failure"},
		{"before-rename", StageBeforeRename, false, "commit:before-rename", "injected failure"},
		{"short write", "", true, "commit:after-write", "ENOSPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFS(t, func(o *Options) {
				o.FailAt = func(s Stage) bool { return s == tt.stage }
			})
			h := tf.writing(t, "old content", syscall.O_WRONLY, "NEW")
			if tt.shortWrite {
				// A change that failed for want of space leaves the temp failed.
				h.file.Change(context.Background(), func(int) syscall.Errno { return syscall.ENOSPC })
			}
			if errno := h.Fsync(as(1), 0); errno != syscall.EIO {
				t.Errorf("fsync = %v, want EIO", errno)
			}
			tf.wantContent(t, "f", "old content", "after the failed commit")
			tf.wantNoTemps(t)
			evs := tf.audit.events(t)
			if len(evs) != 1 || evs[0].Op != tt.wantOp || evs[0].Code != "WRITE_NOT_ATOMIC" || evs[0].Errno != "EIO" || evs[0].Cause != tt.wantCause || evs[0].Path != "f" {
				t.Errorf("audit = %+v, want one %s WRITE_NOT_ATOMIC line for f with cause %q", evs, tt.wantOp, tt.wantCause)
			}
			// Nothing is left to commit: the last release changes nothing.
			h.Release(as(1))
			tf.wantContent(t, "f", "old content", "after release")
		})
	}
}

// TestCommitConflict: a file changed from outside the mount while an owner
// wrote it keeps the outside change; the owner's bytes become a conflict
// copy beside it, and the commit answers EBUSY with a LOCK_CONFLICT line.
func TestCommitConflict(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "mine")
	tf.write(t, "f", "theirs, longer")
	if errno := h.Fsync(as(1), 0); errno != syscall.EBUSY {
		t.Errorf("fsync = %v, want EBUSY", errno)
	}
	tf.wantContent(t, "f", "theirs, longer", "after the conflict")
	ents, _ := os.ReadDir(tf.backing)
	var copies []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "f.realm-conflict-") {
			copies = append(copies, e.Name())
		}
	}
	if len(copies) != 1 {
		t.Fatalf("conflict copies = %q, want one", copies)
	}
	if got, _ := tf.read(t, copies[0]); got != "mine" {
		t.Errorf("conflict copy = %q, want the owner's bytes", got)
	}
	tf.wantNoTemps(t)
	tf.wantAudit(t, "commit LOCK_CONFLICT EBUSY")
	h.Release(as(1))
}

// TestAppendSyncFailureReported: an fsync of appends in place that fails
// (injected: StageSyncAppends) is never dropped (issue 29, defect 2). A
// caller that can hear it gets EIO (fsync(2)); where none can, the last
// release's commit and the fd closed at a conflict (closeAppend, which
// ignored the error before), it is one WRITE_NOT_ATOMIC audit line and a
// line in the daemon's log. The appends stay in the file.
func TestAppendSyncFailureReported(t *testing.T) {
	const syncLine = "commit:sync-appends WRITE_NOT_ATOMIC EIO"
	for _, tc := range []struct {
		name  string
		end   func(t *testing.T, tf *testFS, h *writeHandle) // after one append in place
		audit []string
		want  string
	}{
		{"fsync(2)", func(t *testing.T, tf *testFS, h *writeHandle) {
			if errno := h.Fsync(as(1), 0); errno != syscall.EIO {
				t.Errorf("fsync = %v, want EIO", errno)
			}
		}, []string{syncLine}, "old\nmore\n"},
		{"last release", func(t *testing.T, tf *testFS, h *writeHandle) {}, []string{syncLine}, "old\nmore\n"},
		{"closed at a conflict", func(t *testing.T, tf *testFS, h *writeHandle) {
			// A change through the handle takes a temp; the file
			// changes behind the mount; the commit keeps a conflict copy
			// and closes the appends' fd, which syncs them.
			if errno := tf.lookup(t, "f").Allocate(as(1), h, 0, 1, 0); errno != 0 {
				t.Fatalf("fallocate = %v", errno)
			}
			tf.write(t, "f", "theirs\n")
			if errno := h.Fsync(as(1), 0); errno != syscall.EBUSY {
				t.Errorf("fsync = %v, want EBUSY (the conflict)", errno)
			}
		}, []string{syncLine, "commit LOCK_CONFLICT EBUSY"}, "theirs\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFS(t, func(o *Options) {
				o.FailAt = func(s Stage) bool { return s == StageSyncAppends }
			})
			tf.write(t, "f", "old\n")
			h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_APPEND)
			writeAll(t, h, "more\n")
			tf.wantContent(t, "f", "old\nmore\n", "after the append in place")
			tc.end(t, tf, h)
			h.Release(as(1))
			tf.wantContent(t, "f", tc.want, "at the end")
			tf.wantAudit(t, tc.audit...)
			if !strings.Contains(tf.logs.String(), "f: fsync failed at sync-appends: injected failure") {
				t.Errorf("the daemon log does not tell of the failed fsync:\n%s", tf.logs.String())
			}
		})
	}
}

// TestDirSyncFailureReported: a commit whose directory fsync fails after
// the rename (injected: StageSyncDir) has replaced the file; fsync(2)
// gets EIO, and the failure is a WRITE_NOT_ATOMIC audit line and a line
// in the daemon's log, as it is at a last release no caller hears.
func TestDirSyncFailureReported(t *testing.T) {
	tf := newTestFS(t, func(o *Options) {
		o.FailAt = func(s Stage) bool { return s == StageSyncDir }
	})
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	if errno := h.Fsync(as(1), 0); errno != syscall.EIO {
		t.Errorf("fsync = %v, want EIO", errno)
	}
	h.Release(as(1))
	tf.wantContent(t, "f", "new", "after the commit")
	tf.wantAudit(t, "commit:sync-dir WRITE_NOT_ATOMIC EIO")
	if !strings.Contains(tf.logs.String(), "f: fsync failed at sync-dir: injected failure") {
		t.Errorf("the daemon log does not tell of the failed fsync:\n%s", tf.logs.String())
	}
}

// TestCommitHardLinks: a file with two names is committed in place, so
// both names see the new content and it keeps its inode.
func TestCommitHardLinks(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	if err := os.Link(filepath.Join(tf.backing, "f"), filepath.Join(tf.backing, "g")); err != nil {
		t.Fatal(err)
	}
	old := backingStat(t, tf, "f")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "new")
	if errno := h.Fsync(as(1), 0); errno != 0 {
		t.Fatalf("fsync = %v", errno)
	}
	for _, name := range []string{"f", "g"} {
		if got, _ := tf.read(t, name); got != "new" {
			t.Errorf("%s = %q, want %q", name, got, "new")
		}
	}
	if now := backingStat(t, tf, "f"); now.Ino != old.Ino || now.Nlink != 2 {
		t.Errorf("f is ino %d with %d links, want ino %d with 2: the file was split", now.Ino, now.Nlink, old.Ino)
	}
	h.Release(as(1))
}

// TestCommitAfterUnlink: the data of a file removed while open goes with
// it, as natively; nothing is left behind.
func TestCommitAfterUnlink(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	if errno := tf.root.Unlink(as(1), "f"); errno != 0 {
		t.Fatalf("unlink by the owner = %v", errno)
	}
	if errno := h.Fsync(as(1), 0); errno != 0 {
		t.Errorf("fsync = %v, want success", errno)
	}
	h.Release(as(1))
	if _, ok := tf.read(t, "f"); ok {
		t.Error("f came back")
	}
	tf.wantNoTemps(t)
}

// TestCommitFollowsRename: a rename through the mount while the file is
// being written moves the write with it; the commit lands on the new name.
func TestCommitFollowsRename(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_WRONLY|syscall.O_TRUNC, "new")
	if errno := tf.root.Rename(as(1), "f", tf.root, "g", 0); errno != 0 {
		t.Fatalf("rename = %v", errno)
	}
	h.Release(as(1))
	tf.wantContent(t, "g", "new", "after the commit")
	if _, ok := tf.read(t, "f"); ok {
		t.Error("the commit recreated f")
	}
}

// TestLastReleaseCommits: the owner's last release commits what is left.
func TestLastReleaseCommits(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	h1 := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	h2 := tf.openWrite(t, 1, "f", syscall.O_WRONLY)
	writeAll(t, h1, "new")
	h1.Release(as(1))
	tf.wantContent(t, "f", "old", "after a release with another handle open")
	h2.Release(as(1))
	tf.wantContent(t, "f", "new", "after the last release")
}

// sleeper starts a process that holds no descriptor of the test's files,
// to stand for a process on the mount; it is killed at cleanup.
func sleeper(t *testing.T) uint32 {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return uint32(cmd.Process.Pid)
}

// TestFlushWaitsForTheOwnersOtherWriters: processes of one owner (here two
// real processes in one cgroup) share its write of a file. A last close
// commits nothing while another of them that has changed the file still
// holds it, so its half-written bytes stay in the temp; that one's last
// close commits both. A reader's close never commits a writer's half.
func TestFlushWaitsForTheOwnersOtherWriters(t *testing.T) {
	b, c := sleeper(t), sleeper(t)
	owners := procinfo.NewResolver(procinfo.OwnerCgroup, "/proc")
	t.Cleanup(func() { owners.Close() })
	tf := newTestFS(t, func(o *Options) { o.Owners = owners })
	write := func(h *writeHandle, pid uint32, data string, off int64) {
		t.Helper()
		if n, errno := h.Write(as(pid), []byte(data), off); errno != 0 || int(n) != len(data) {
			t.Fatalf("write %q = %d, %v", data, n, errno)
		}
	}
	flush := func(h openFile, pid uint32) {
		t.Helper()
		if errno := h.Flush(as(pid)); errno != 0 {
			t.Fatalf("flush = %v", errno)
		}
	}

	tf.write(t, "f", "old")
	hb := tf.openWrite(t, b, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	write(hb, b, "AAAA", 0)
	hc := tf.openWrite(t, c, "f", syscall.O_WRONLY)
	write(hc, c, "B1", 4)
	flush(hb, b)
	tf.wantContent(t, "f", "old", "after b's last close while c is half way")
	write(hc, c, "B2", 6)
	flush(hc, c)
	tf.wantContent(t, "f", "AAAAB1B2", "after c's last close")
	hb.Release(as(b))
	hc.Release(as(c))

	// An open for writing that changes nothing holds no one back.
	hw := tf.openWrite(t, b, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	write(hw, b, "CC", 0)
	idle := tf.openWrite(t, c, "f", syscall.O_RDWR)
	fr, _, errno := tf.lookup(t, "f").Open(as(c), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("read open: %v", errno)
	}
	hr, ok := fr.(*writeHandle)
	if !ok {
		t.Fatal("the owner's reader does not share its write")
	}
	flush(hr, c)
	tf.wantContent(t, "f", "AAAAB1B2", "after a reader of the owner closed")
	flush(hw, b)
	tf.wantContent(t, "f", "CC", "after the writer's last close, beside an idle write open")
	for _, h := range []*writeHandle{hr, idle, hw} {
		h.Release(as(c))
	}
	tf.wantNoTemps(t)
}

// TestOtherOwnerRefused: while one owner writes a file, another owner's
// write open, rename over it and unlink of it are EBUSY, audited
// LOCK_CONFLICT, and the file is untouched.
func TestOtherOwnerRefused(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	tf.write(t, "g", "other")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "new")
	if _, _, errno := tf.lookup(t, "f").Open(as(2), syscall.O_WRONLY); errno != syscall.EBUSY {
		t.Errorf("open by another owner = %v, want EBUSY", errno)
	}
	if errno := tf.root.Rename(as(2), "g", tf.root, "f", 0); errno != syscall.EBUSY {
		t.Errorf("rename over it by another owner = %v, want EBUSY", errno)
	}
	if errno := tf.root.Unlink(as(2), "f"); errno != syscall.EBUSY {
		t.Errorf("unlink by another owner = %v, want EBUSY", errno)
	}
	tf.wantAudit(t, "open LOCK_CONFLICT EBUSY", "rename LOCK_CONFLICT EBUSY", "unlink LOCK_CONFLICT EBUSY")
	tf.wantContent(t, "f", "old", "after refused operations")
	h.Release(as(1))
	tf.wantContent(t, "f", "new", "after the owner's release")
}

// TestCopyFileRangeBothWays: copies between two files that are both being
// written, in both directions at once, hold both writes' locks in one
// order and finish (they deadlocked when each took its source's lock
// first), and what they copy is committed with the target.
func TestCopyFileRangeBothWays(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "fff")
	tf.write(t, "g", "ggg")
	hf := tf.openWrite(t, 1, "f", syscall.O_RDWR)
	hg := tf.openWrite(t, 1, "g", syscall.O_RDWR)
	writeAll(t, hf, "FFF")
	writeAll(t, hg, "GGG")
	var wg sync.WaitGroup
	for _, pair := range [][2]*writeHandle{{hf, hg}, {hg, hf}} {
		wg.Go(func() {
			for range 500 {
				if _, errno := tf.root.CopyFileRange(as(1), pair[0], 0, nil, pair[1], 0, 3, 0); errno != 0 {
					t.Errorf("copy_file_range: %v", errno)
					return
				}
			}
		})
	}
	wg.Wait()
	hf.Release(as(1))
	hg.Release(as(1))
	f, _ := tf.read(t, "f")
	g, _ := tf.read(t, "g")
	if f != g || (f != "FFF" && f != "GGG") {
		t.Errorf("f = %q, g = %q; want both the same copy of one of them", f, g)
	}
}

// TestWriteAfterConflict: after a conflict, the owner's later writes
// through the same handle apply to the file as the outside process left it
// (here replaced by rename), never to the version the write began with: a
// second commit must not bring back the content the outside change
// replaced.
func TestWriteAfterConflict(t *testing.T) {
	tf := newTestFS(t, nil)
	h := tf.writing(t, "old", syscall.O_RDWR, "mine")
	p := filepath.Join(tf.backing, "f")
	if err := os.WriteFile(p+".new", []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	if errno := h.Fsync(as(1), 0); errno != syscall.EBUSY {
		t.Fatalf("fsync = %v, want EBUSY", errno)
	}
	writeAll(t, h, "T")
	if errno := h.Fsync(as(1), 0); errno != 0 {
		t.Fatalf("second fsync = %v", errno)
	}
	tf.wantContent(t, "f", "Theirs", "after a write on top of the outside change")
	buf := make([]byte, 16)
	res, errno := h.Read(as(1), buf, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if b, _ := res.Bytes(buf); string(b) != "Theirs" {
		t.Errorf("the handle reads %q, want %q", b, "Theirs")
	}
	h.Release(as(1))
	tf.wantContent(t, "f", "Theirs", "after release")
	tf.wantNoTemps(t)
}

// TestWriteKnowsEachInodeOfItsHandles: one file can stand on the mount
// under two kernel inodes at once (a write open retires a node whose
// readers read through the page cache, and the kernel looks the name up
// again). A close's scan of the opener's descriptors must count those of
// every inode the owner's handles of the file were opened on: TestModel
// (seed 319580211003) saw the close of one of two RDWR opens of a file by
// one process commit, the other open living on another inode.
func TestWriteKnowsEachInodeOfItsHandles(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	h1 := tf.openWrite(t, 1, "f", syscall.O_RDWR)
	n1 := h1.node
	n1.retire()
	tf.root.RmChild("f")
	h2 := tf.openWrite(t, 1, "f", syscall.O_RDWR)
	n2 := h2.node
	if n1 == n2 || n1.StableAttr().Ino == n2.StableAttr().Ino {
		t.Fatalf("the second open is on the first's node (ino %d): the test needs two", n1.StableAttr().Ino)
	}
	w := h1.file.Pending()
	if w != h2.file.Pending() {
		t.Fatal("the two opens do not share the owner's write")
	}
	inos := func() []uint64 {
		w.Entry().Lock()
		defer w.Entry().Unlock()
		return w.KernelInos()
	}
	got := inos()
	slices.Sort(got)
	want := []uint64{n1.StableAttr().Ino, n2.StableAttr().Ino}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the write's handles are on inodes %v; want %v", got, want)
	}
	h2.Release(as(1))
	got = inos()
	if !slices.Equal(got, []uint64{n1.StableAttr().Ino}) {
		t.Errorf("after the second handle's release: inodes %v; want [%d]", got, n1.StableAttr().Ino)
	}
	h1.Release(as(1))
}

// TestCommitSyncs: which fsyncs a commit makes (syncPlan). With
// durability=full a file that held content is replaced by a temp on disk
// and the rename is synced; a file that was empty (a new file's first
// version) has nothing to tear and, where BACKING's filesystem writes a
// renamed file's data before the rename, skips the temp's fsync, not the
// directory's; its bytes kept as a conflict copy are synced. An fsync(2)
// syncs both in either mode; atomic syncs nothing unasked.
func TestCommitSyncs(t *testing.T) {
	tests := []struct {
		name       string
		durability Durability
		old        string
		fsync      bool   // commit by fsync(2), else by the last release
		theirs     string // written in BACKING meanwhile: a conflict copy
		unordered  bool   // BACKING's filesystem does not order renamed data
		want       []string
	}{
		{"full, rewrite", DurabilityFull, "old", false, "", false, []string{"temp", "dir"}},
		{"full, first version", DurabilityFull, "", false, "", false, []string{"dir"}},
		{"full, first version, not ext4", DurabilityFull, "", false, "", true, []string{"temp", "dir"}},
		{"full, first version, fsync(2)", DurabilityFull, "", true, "", false, []string{"temp", "dir"}},
		{"full, first version, conflict copy", DurabilityFull, "", false, "theirs", false, []string{"temp"}},
		{"atomic, rewrite", DurabilityAtomic, "old", false, "", false, nil},
		{"atomic, first version", DurabilityAtomic, "", false, "", false, nil},
		{"atomic, rewrite, fsync(2)", DurabilityAtomic, "old", true, "", false, []string{"temp", "dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			tf := newTestFS(t, func(o *Options) {
				o.Durability = tt.durability
				o.onSync = func(what string) { got = append(got, what) }
			})
			tf.ordersRenames = !tt.unordered
			h := tf.writing(t, tt.old, syscall.O_WRONLY|syscall.O_TRUNC, "new")
			want := "new"
			if tt.theirs != "" {
				tf.write(t, "f", tt.theirs)
				want = tt.theirs
			}
			if tt.fsync {
				if errno := h.Fsync(as(1), 0); errno != 0 {
					t.Fatalf("fsync = %v", errno)
				}
			}
			h.Release(as(1))
			tf.wantContent(t, "f", want, "after the commit")
			if !slices.Equal(got, tt.want) {
				t.Errorf("fsyncs %q, want %q", got, tt.want)
			}
		})
	}
}
