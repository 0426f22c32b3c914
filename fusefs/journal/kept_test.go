package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// TestRemove: an unlink or an rmdir made by Remove answers as the system
// call would, and keeps what it removed; what it refuses it leaves in
// place, its intent (if appended) ended aborted.
func TestRemove(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     Op
		setup  func(t *testing.T, b *backing)
		target string
		swap   func(t *testing.T, b *backing) // between Remove's stat and its rename
		// afterCheck runs between Remove's checks and its rename.
		afterCheck func(t *testing.T, b *backing)
		wantErr    error
		record     End    // "" for no record at all
		kept       string // as checkKept
	}{
		{name: "unlink a file", op: OpUnlink, setup: func(t *testing.T, b *backing) { b.write(t, "d/f", "data") },
			target: "d/f", record: Done, kept: "data"},
		{name: "unlink a symlink", op: OpUnlink, setup: func(t *testing.T, b *backing) {
			must(t, os.MkdirAll(filepath.Join(b.path, "d"), 0o755))
			must(t, os.Symlink("../nowhere", filepath.Join(b.path, "d/l")))
		}, target: "d/l", record: Done, kept: "symlink"},
		{name: "rmdir an empty directory", op: OpRmdir, setup: func(t *testing.T, b *backing) {
			must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o700))
		}, target: "d/e", record: Done, kept: "dir"},
		{name: "rmdir a full directory", op: OpRmdir, setup: func(t *testing.T, b *backing) { b.write(t, "d/e/x", "x") },
			target: "d/e", wantErr: unix.ENOTEMPTY},
		{name: "rmdir a directory filled meanwhile", op: OpRmdir, setup: func(t *testing.T, b *backing) {
			must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o700))
		}, target: "d/e", afterCheck: func(t *testing.T, b *backing) { b.write(t, "d/e/x", "x") },
			wantErr: unix.ENOTEMPTY, record: Aborted},
		{name: "unlink a directory", op: OpUnlink, setup: func(t *testing.T, b *backing) { b.write(t, "d/e/x", "x") },
			target: "d/e", wantErr: unix.EISDIR},
		{name: "rmdir a file", op: OpRmdir, setup: func(t *testing.T, b *backing) { b.write(t, "d/f", "x") },
			target: "d/f", wantErr: unix.ENOTDIR},
		{name: "rmdir a symlink to a directory", op: OpRmdir, setup: func(t *testing.T, b *backing) {
			must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o700))
			must(t, os.Symlink("e", filepath.Join(b.path, "d/l")))
		}, target: "d/l", wantErr: unix.ENOTDIR},
		{name: "rmdir a directory swapped", op: OpRmdir, setup: func(t *testing.T, b *backing) {
			must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o700))
		}, target: "d/e", swap: func(t *testing.T, b *backing) {
			mv(t, b, "d/e", "d/old")
			must(t, os.Mkdir(filepath.Join(b.path, "d/e"), 0o700))
		}, wantErr: ErrChanged},
		{name: "unlink nothing", op: OpUnlink, setup: func(t *testing.T, b *backing) { b.write(t, "d/f", "x") },
			target: "d/absent", wantErr: unix.ENOENT},
		{name: "unlink a file swapped", op: OpUnlink, setup: func(t *testing.T, b *backing) { b.write(t, "d/f", "x") },
			target: "d/f", swap: func(t *testing.T, b *backing) { b.write(t, "d/g", "y"); mv(t, b, "d/g", "d/f") },
			wantErr: ErrChanged, record: Aborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			tc.setup(t, b)
			j := b.open(t, Options{Durable: true})
			rec := Record{Op: tc.op, Path: tc.target}
			if tc.swap != nil {
				rec.Before = ObjectOf(b.stat(t, tc.target))
				tc.swap(t, b)
			}
			if tc.afterCheck != nil {
				testHookBeforeMove = func() { tc.afterCheck(t, b) }
				defer func() { testHookBeforeMove = nil }()
			}
			before := snapshot(t, b)
			seq, err := j.Remove(rec, b.dirFd(t, filepath.Dir(tc.target)), filepath.Base(tc.target))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Remove = %v, want %v", err, tc.wantErr)
			}
			recs, rerr := j.Records(Filter{})
			must(t, rerr)
			switch {
			case tc.record == "" && len(recs) != 0:
				t.Errorf("a refusal before the intent recorded %+v", recs)
			case tc.record != "" && (len(recs) != 1 || recs[0].End != tc.record || recs[0].Seq != seq || !recs[0].Kept || recs[0].Before == nil):
				t.Errorf("records %+v, want one kept, ended %s", recs, tc.record)
			}
			_, lerr := os.Lstat(filepath.Join(b.path, tc.target))
			if gone := errors.Is(lerr, os.ErrNotExist); gone != (tc.wantErr == nil || tc.wantErr == unix.ENOENT) {
				t.Errorf("after Remove, %s: %v", tc.target, lerr)
			}
			if tc.afterCheck != nil {
				if _, err := os.Lstat(filepath.Join(b.path, tc.target, "x")); err != nil {
					t.Errorf("the entry made meanwhile: %v", err)
				}
			} else if tc.wantErr != nil {
				if after := snapshot(t, b); after != before {
					t.Errorf("a refused Remove changed BACKING:\n%s\nwas\n%s", after, before)
				}
			}
			if seq != 0 && tc.kept == "symlink" {
				if target, err := os.Readlink(b.keptPath(seq)); err != nil || target != "../nowhere" {
					t.Errorf("kept/%d: %q, %v, want the symlink", seq, target, err)
				}
			} else if seq != 0 {
				checkKept(t, b, seq, tc.kept)
			}
		})
	}
}

// TestRemoveSwappedAndTaken: the name Remove looked at is swapped for
// another file before its rename and taken again before the other file
// could be put back (both from outside). The other file was removed, as
// unlinkat would have removed it: Remove answers nil, and its record,
// read back (the journal closed and opened again too), is done, kept, and
// names the file it removed.
func TestRemoveSwappedAndTaken(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		b := newBacking(t)
		b.write(t, "d/f", "x")
		j := b.open(t, Options{Durable: true})
		rec := Record{Op: OpUnlink, Path: "d/f", Before: ObjectOf(b.stat(t, "d/f"))}
		b.write(t, "d/g", "y")
		mv(t, b, "d/g", "d/f")
		swapped := b.stat(t, "d/f")
		testHookAfterMove = func() { b.write(t, "d/f", "z") }
		seq, err := j.Remove(rec, b.dirFd(t, "d"), "f")
		testHookAfterMove = nil
		if err != nil {
			t.Fatalf("Remove = %v, want nil", err)
		}
		if reopen {
			must(t, j.Close())
			j = b.open(t, Options{})
		}
		recs, err := j.Records(Filter{})
		must(t, err)
		if len(recs) != 1 || recs[0].Seq != seq || recs[0].End != Done || !recs[0].Kept || recs[0].Before == nil ||
			recs[0].Before.Ino != swapped.Ino || recs[0].Before.Size != 1 {
			t.Fatalf("records %+v, want one done, naming the swapped file (inode %d)", recs, swapped.Ino)
		}
		checkKept(t, b, seq, "y")
		if got, err := os.ReadFile(filepath.Join(b.path, "d/f")); err != nil || string(got) != "z" {
			t.Errorf("d/f: %q, %v, want the file written last", got, err)
		}
	}
}

// TestAbort: an aborted change's kept link goes, and its file keeps its
// one name; a Change ends once.
func TestAbort(t *testing.T) {
	b := newBacking(t)
	b.write(t, "f", "v")
	j := b.open(t, Options{Durable: true})
	c, err := j.Begin(Record{Op: OpRewrite, Path: "f"}, b.pathFd(t, "f"))
	must(t, err)
	if n := b.stat(t, "f").Nlink; n != 2 {
		t.Errorf("kept by link: nlink %d, want 2", n)
	}
	must(t, c.Abort())
	if n := b.stat(t, "f").Nlink; n != 1 {
		t.Errorf("aborted: nlink %d, want 1", n)
	}
	checkKept(t, b, c.Seq(), "")
	if err := c.Done(nil); err == nil {
		t.Error("a second end was taken")
	}
	if _, err := j.Begin(Record{Op: OpUnlink, Path: "f"}, NoKeep); err == nil {
		t.Error("Begin took an unlink (Remove's)")
	}
	if _, err := j.Begin(Record{Op: "frobnicate", Path: "f"}, NoKeep); err == nil {
		t.Error("Begin took an unknown op")
	}
}

// TestKeepByLink: Begin keeps a file, a symlink or a fifo by a link to
// the object itself; a directory cannot be linked, so Begin fails and
// ends its intent aborted.
func TestKeepByLink(t *testing.T) {
	b := newBacking(t)
	b.write(t, "f", "data")
	must(t, os.Symlink("f", filepath.Join(b.path, "l")))
	must(t, unix.Mkfifo(filepath.Join(b.path, "p"), 0o600))
	must(t, os.Mkdir(filepath.Join(b.path, "d"), 0o700))
	j := b.open(t, Options{Durable: true})
	for _, name := range []string{"f", "l", "p"} {
		c, err := j.Begin(Record{Op: OpRename, Path: "x", To: name, Replaced: ObjectOf(b.stat(t, name))}, b.pathFd(t, name))
		must(t, err)
		must(t, c.Done(nil))
		var kept, orig unix.Stat_t
		must(t, unix.Lstat(b.keptPath(c.Seq()), &kept))
		must(t, unix.Lstat(filepath.Join(b.path, name), &orig))
		if kept.Ino != orig.Ino || kept.Mode != orig.Mode {
			t.Errorf("%s: kept/%d is %o ino %d, want the object itself (%o ino %d)", name, c.Seq(), kept.Mode, kept.Ino, orig.Mode, orig.Ino)
		}
	}
	if _, err := j.Begin(Record{Op: OpRename, Path: "x", To: "d"}, b.pathFd(t, "d")); err == nil {
		t.Fatal("a directory was kept by link")
	}
	recs, err := j.Records(Filter{})
	must(t, err)
	if last := recs[len(recs)-1]; last.End != Aborted {
		t.Errorf("the failed keep's intent ended %q, want aborted", last.End)
	}
}

// BenchmarkRemoveKeptSize: an unlink through the journal (the file renamed
// into kept/, its intent and end) beside a plain unlinkat, into a kept/
// empty and one holding 20,000 entries, on the test's temp dir's
// filesystem as the mount keeps it (Durable, Ordered: ext4 with jbd2).
// Issue 30's rm -rf cost grew with kept/'s size in one mount's rounds;
// this measures the journal's side of that without FUSE.
// go test -run '^$' -bench RemoveKeptSize -benchtime 5000x ./fusefs/journal
func BenchmarkRemoveKeptSize(b *testing.B) {
	durable := Options{Durable: true, Ordered: true}
	for _, tc := range []struct {
		name string
		kept int // entries in kept/ before the timed removals; -1: no journal
		opts Options
	}{{"unlinkat", -1, durable}, {"kept=0", 0, durable}, {"kept=20000", 20000, durable}, {"atomic", 0, Options{}}} {
		b.Run(tc.name, func(b *testing.B) {
			bk := newBacking(b)
			j, err := Open(bk.root, DefaultDir, tc.opts)
			must(b, err)
			defer j.Close()
			must(b, os.Mkdir(filepath.Join(bk.path, "d"), 0o755))
			dir := bk.dirFd(b, "d")
			makeFiles := func(prefix string, n int) {
				for i := range n {
					must(b, os.WriteFile(filepath.Join(bk.path, "d", fmt.Sprintf("%s%d", prefix, i)), []byte("data\n"), 0o644))
				}
			}
			remove := func(name string) error {
				if tc.kept < 0 {
					return dirfd.Unlink(dir, name, 0)
				}
				_, err := j.Remove(Record{Owner: "session:7", Op: OpUnlink, Path: "d/" + name}, dir, name)
				return err
			}
			makeFiles("old", tc.kept)
			for i := range tc.kept {
				must(b, remove(fmt.Sprintf("old%d", i)))
			}
			makeFiles("f", b.N)
			b.ResetTimer()
			for i := range b.N {
				if err := remove(fmt.Sprintf("f%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
