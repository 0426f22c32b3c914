package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal/keptname"
)

// crash stops j as a kill -9 of the daemon would: the lines it holds are
// lost, nothing more is written, its descriptors go.
func (j *Journal) crash() {
	j.mu.Lock()
	j.drop()
	j.stop()
	j.closed = true
	j.mu.Unlock()
	j.closeFds()
}

// TestRemoveLostRebuilt: a removal's intent is held, not written, and its
// object goes to a described entry; a kill -9 that loses the held lines
// leaves that entry, and the next Open rebuilds the record from it: the
// owner, incarnation, session, path, op and object the change had, ended
// done, its kept version readable and restorable as any other.
func TestRemoveLostRebuilt(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "atomic", true: "durable"}[durable], func(t *testing.T) {
			b := newBacking(t)
			b.write(t, "d/f", "data")
			must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o700))
			fst, est := b.stat(t, "d/f"), b.stat(t, "d/e")
			j := b.open(t, Options{Durable: durable})
			j.describes = true // durable: as on a filesystem that journals its metadata
			c, err := j.Begin(Record{Owner: "pid:9", Op: OpChmod, Path: "d/f", Before: ObjectOf(fst)}, NoKeep)
			must(t, err)
			must(t, c.Done(nil))
			dir := b.dirFd(t, "d")
			rm := Record{Owner: "session:4", OwnerStart: "77-88", Session: "agent~1", Op: OpUnlink, Path: "d/f"}
			fseq, err := j.Remove(rm, dir, "f")
			must(t, err)
			rmd := Record{Owner: "session:4", OwnerStart: "77-88", Session: "agent~1", Op: OpRmdir, Path: "d/e"}
			eseq, err := j.Remove(rmd, dir, "e")
			must(t, err)
			if !strings.Contains(b.keptPath(fseq), string(keptname.Sep)) {
				t.Fatalf("the unlink kept %s, want a described entry", b.keptPath(fseq))
			}
			j.crash()
			seg, err := os.ReadFile(b.jpath(logName, segmentName(1)))
			must(t, err)
			if strings.Contains(string(seg), `"op":"unlink"`) {
				t.Fatalf("the unlink's intent was written before the crash; want it held:\n%s", seg)
			}

			j = b.open(t, Options{Durable: durable})
			j.describes = true
			if rc := j.Recovery(); rc.Rebuilt != 2 || rc.Done != 2 || rc.KeptRemoved != 0 {
				t.Errorf("recovery %+v, want 2 rebuilt and done, nothing removed", rc)
			}
			recs, err := j.Records(Filter{})
			must(t, err)
			if len(recs) != 3 {
				t.Fatalf("records %+v, want the chmod and the two removals", recs)
			}
			for i, want := range []struct {
				seq uint64
				op  Op
				st  *unix.Stat_t
			}{{fseq, OpUnlink, fst}, {eseq, OpRmdir, est}} {
				r := recs[i+1]
				if r.Seq != want.seq || r.Op != want.op || r.Path != []string{"d/f", "d/e"}[i] ||
					r.Owner != "session:4" || r.OwnerStart != "77-88" || r.Session != "agent~1" ||
					!r.Kept || r.End != Done || r.Before == nil || r.Before.ID() != (ID{want.st.Dev, want.st.Ino}) ||
					r.Before.Mode != want.st.Mode || r.Time.IsZero() {
					t.Errorf("rebuilt record %+v (before %+v), want %s of %s by session:4", r, r.Before, want.op, r.Path)
				}
			}
			fd, err := j.OpenKept(fseq)
			must(t, err)
			unix.Close(fd)
			_, err = j.Restore(Record{Owner: "session:5", Op: OpCreate, Path: "d/f"}, fseq, NoKeep, dir, "f")
			must(t, err)
			if got, _ := os.ReadFile(filepath.Join(b.path, "d/f")); string(got) != "data" {
				t.Errorf("restored d/f holds %q, want data", got)
			}
			must(t, j.Close())
			j = b.open(t, Options{Durable: durable})
			if rc := j.Recovery(); rc.Rebuilt != 0 {
				t.Errorf("a second Open rebuilt again: %+v", rc)
			}
			must(t, j.Close())
		})
	}
}

// TestRemoveLostBothNames: a crash that leaves a described entry while
// the path still names the object (a filesystem with no journal, repaired:
// the rename half made) rebuilds the record and ends it aborted, the
// entry, a second link, removed.
func TestRemoveLostBothNames(t *testing.T) {
	b := newBacking(t)
	b.write(t, "f", "data")
	j := b.open(t, Options{Durable: true})
	j.describes = true // as on a filesystem that journals its metadata
	seq, err := j.Remove(Record{Owner: "pid:2", Op: OpUnlink, Path: "f"}, b.dirFd(t, "."), "f")
	must(t, err)
	entry := b.keptPath(seq)
	j.crash()
	must(t, os.Link(entry, filepath.Join(b.path, "f")))

	j = b.open(t, Options{Durable: true})
	if rc := j.Recovery(); rc.Rebuilt != 1 || rc.Aborted != 1 || rc.KeptRemoved != 1 {
		t.Errorf("recovery %+v, want 1 rebuilt, aborted, its link removed", rc)
	}
	if _, err := os.Lstat(entry); !os.IsNotExist(err) {
		t.Errorf("the entry is still there: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(b.path, "f")); string(got) != "data" {
		t.Errorf("f holds %q, want data", got)
	}
	must(t, j.Close())
}

// TestReaderOpensDescribed: a reader beside the daemon finds a removal's
// kept version under its described name.
func TestReaderOpensDescribed(t *testing.T) {
	b := newBacking(t)
	b.write(t, "f", "data")
	j := b.open(t, Options{})
	seq, err := j.Remove(Record{Owner: "pid:2", Op: OpUnlink, Path: "f"}, b.dirFd(t, "."), "f")
	must(t, err)
	must(t, j.WriteHeld())
	r, err := OpenReader(b.dirFd(t, "."), DefaultDir)
	must(t, err)
	defer r.Close()
	fd, err := r.OpenKept(seq)
	must(t, err)
	defer unix.Close(fd)
	var st unix.Stat_t
	must(t, unix.Fstat(fd, &st))
	if st.Size != 4 {
		t.Errorf("kept version of %d bytes, want 4", st.Size)
	}
	if _, err := r.OpenKept(seq + 1); err == nil {
		t.Errorf("OpenKept of a change that kept nothing succeeded")
	}
	must(t, j.Close())
}

// TestRemoveUndescribed: where kept/'s filesystem takes names too short
// for a removal's fields, or a durable journal's filesystem may leave a
// rename half made after a crash (no metadata journal), Remove keeps the
// object as kept/<seq>, its intent written before the rename.
func TestRemoveUndescribed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nameMax   int
		describes bool
	}{
		{"short names", 25, true},
		{"no metadata journal", unix.NAME_MAX, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			b.write(t, "f", "data")
			j := b.open(t, Options{Durable: true})
			j.nameMax, j.describes = tc.nameMax, tc.describes
			seq, err := j.Remove(Record{Owner: "pid:2", Op: OpUnlink, Path: "f"}, b.dirFd(t, "."), "f")
			must(t, err)
			if _, err := os.Lstat(b.jpath(keptName, keptEntry(seq))); err != nil {
				t.Errorf("kept/%d: %v, want the file there", seq, err)
			}
			j.crash()
			seg, err := os.ReadFile(b.jpath(logName, segmentName(1)))
			must(t, err)
			if !strings.Contains(string(seg), `"op":"unlink"`) {
				t.Errorf("the intent was not written before the rename:\n%s", seg)
			}
		})
	}
}
