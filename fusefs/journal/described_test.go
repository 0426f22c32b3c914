package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestDescribedEntry: a removal's described name reads back as the fields
// it was made of, whatever bytes they hold; fields too long for a name
// make none.
func TestDescribedEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  Record
		fits bool
	}{
		{"plain", Record{Seq: 7, Owner: "session:12", OwnerStart: "123-456", Path: "src/main.go"}, true},
		{"a session", Record{Seq: 8, Owner: "pid:3", Session: "s-1", Path: "a"}, true},
		{"separators in fields", Record{Seq: 9, Owner: "cgroup:/user.slice/a~b", OwnerStart: "%", Session: "x/y", Path: "d~e/%41/f~"}, true},
		{"not UTF-8", Record{Seq: 10, Owner: "pid:1", Path: "bad\xff/name\x01"}, true},
		{"dots", Record{Seq: 11, Owner: "pid:1", Path: "../.."}, true},
		{"too long", Record{Seq: 12, Owner: "pid:1", Path: strings.Repeat("d/", 120)}, false},
		{"long enough for a short seq only", Record{Seq: 12, Owner: "pid:1", Path: strings.Repeat("a", 230)}, false},
		{"long, for any seq", Record{Seq: 12, Owner: "pid:1", Path: strings.Repeat("a", 226)}, true},
		{"no path", Record{Seq: 13, Owner: "pid:1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, fits := describedEntry(&tc.rec, unix.NAME_MAX)
			if fits != tc.fits {
				t.Fatalf("%q fits %v, want %v", name, fits, tc.fits)
			}
			if !fits {
				return
			}
			if strings.Contains(name, "/") || len(name) > unix.NAME_MAX {
				t.Fatalf("%q is no name of a directory entry", name)
			}
			d, ok := parseDescribed(name)
			r := tc.rec
			want := described{name: name, seq: r.Seq, owner: r.Owner, ownerAt: r.OwnerStart, session: r.Session, path: r.Path}
			if !ok || d != want {
				t.Errorf("parse(%q) = %+v, %v; want %+v", name, d, ok, want)
			}
			if seq, ok := keptSeq(name); !ok || seq != r.Seq {
				t.Errorf("keptSeq(%q) = %d, %v", name, seq, ok)
			}
		})
	}
	for _, bad := range []string{"7", "7~a~b~c", "x~a~b~c~d", "7~a~b~c~", "7~%4~b~c~d", "7~a~b~c~d~e", "0~a~b~c~d"} {
		if d, ok := parseDescribed(bad); ok {
			t.Errorf("parse(%q) = %+v, want no described entry", bad, d)
		}
	}
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
			if !strings.Contains(b.keptPath(fseq), string(describedSep)) {
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
	if _, fits := describedEntry(&Record{Seq: 1, Owner: "pid:1", Path: "a/b"}, 25); fits {
		t.Errorf("a described name of 34 bytes fits in 25")
	}
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
