package writeproto

import (
	"errors"
	"testing"
)

// newFile opens a write on a file the open made as its temp alone
// (Open.New), as the engine does: the temp made, the handle truncating.
func newFile(p *proc) *Handle {
	return p.open(Open{Write: true, Truncate: true, Fresh: true, New: true})
}

// TestNewFilePublish: an unpublished file's first commit publishes it
// where its name is free, and keeps a conflict copy where the host made
// the name meanwhile; from there on it is a write as any other.
func TestNewFilePublish(t *testing.T) {
	for _, tc := range []struct {
		name    string
		now     Name
		gone    bool
		want    Verdict
		unpubAt bool // still unpublished after the verdict is performed
	}{
		{"the name is free", NameMissing, false, CommitPublish, false},
		{"the host made the name", NameSame, false, Conflict, true},
		{"the host made it, changed", NameChanged, false, Conflict, true},
		{"the look failed", NameUnknown, false, FailCommit, true},
		{"removed through the mount", NameMissing, true, DropGone, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t)
			h := newFile(p)
			if !p.w.Unpublished() || p.w.State() != Pending {
				t.Fatalf("a new file's write: unpublished %v, state %v; want unpublished, pending", p.w.Unpublished(), p.w.State())
			}
			if tc.gone {
				p.w.Removed()
			}
			if p.w.FlushStart(h) && p.w.Flush(h, FlushFacts{}) != FlushCommit {
				t.Fatal("the opener's last close does not commit")
			}
			if p.w.Commit() != StartSeal {
				t.Fatal("the commit does not seal the temp")
			}
			v := p.w.Judge(tc.now, 0)
			if v != tc.want {
				t.Fatalf("Judge = %v, want %v", v, tc.want)
			}
			if v == CommitPublish {
				p.w.Committed()
			} else {
				p.w.TempGone()
			}
			if p.w.Unpublished() != tc.unpubAt {
				t.Fatalf("unpublished after %v: %v", v, p.w.Unpublished())
			}
			if p.w.Release(h, true) != ReleaseCommit {
				t.Fatal("the last release does not commit what is left")
			}
			p.w.Released(h)
		})
	}
}

// TestNewFileMadeReal: made real, the write goes on as any other: its
// commit renames over the file at the name. A new file's truncation
// overwrites nothing, its appends neither; a write elsewhere does; and
// once published the creating handle appends in place, as a create's.
func TestNewFileMadeReal(t *testing.T) {
	p := newProc(t)
	h := newFile(p)
	if p.w.Overwrites() {
		t.Fatal("a new file's temp overwrites something before any write")
	}
	p.w.TempWrite(h, true)
	p.w.TempWritten(3, 0)
	if p.w.Overwrites() {
		t.Fatal("an append to a new file overwrites something")
	}
	p.w.TempWrite(h, false)
	p.w.TempWritten(3, 0)
	if !p.w.Overwrites() {
		t.Fatal("a write at an offset does not overwrite")
	}
	p.w.MadeReal()
	if p.w.Unpublished() {
		t.Fatal("made real, the file is still unpublished")
	}
	if v := p.commit(); v != CommitRename {
		t.Fatalf("the commit after MadeReal: %v, want %v", v, CommitRename)
	}
	if r := p.w.WriteRoute(h, true, false); r != RouteInPlace {
		t.Fatalf("an append through the creating handle after the commit: %v, want %v", r, RouteInPlace)
	}
}

// TestNewFileReleaseWithoutFlush: a new file's handle released with no
// close seen (its open failed in the kernel) still commits: the create
// made the file, which a truncating open that failed would not empty.
func TestNewFileReleaseWithoutFlush(t *testing.T) {
	p := newProc(t)
	h := newFile(p)
	if a := p.w.Release(h, false); a != ReleaseCommit {
		t.Fatalf("Release = %v, want %v", a, ReleaseCommit)
	}
	if p.w.Commit() != StartSeal || p.w.Judge(NameMissing, 0) != CommitPublish {
		t.Fatal("the release's commit does not publish")
	}
	p.w.Committed()
	p.w.Released(h)
}

// TestNewFileViolations: MadeReal of a published write, and a new file's
// open that is not the write's first or does not truncate, are the
// caller's bugs.
func TestNewFileViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(w *Write)
	}{
		{"made real twice", func(w *Write) {
			w.Open(Open{Write: true, Truncate: true, New: true})
			w.TempMade()
			w.MadeReal()
			w.MadeReal()
		}},
		{"new without truncate", func(w *Write) { w.Open(Open{Write: true, New: true}) }},
		{"new joining a write", func(w *Write) {
			w.Open(rewrite)
			w.Open(Open{Write: true, Truncate: true, New: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Write
			tc.run(&w)
			var v *Violation
			if !errors.As(w.Err(), &v) {
				t.Fatalf("no violation reported: %v", w.Err())
			}
		})
	}
}

// TestNewFileOtherWriterCommits: a new file's opener that has written
// nothing holds no other close back: another process of the owner that
// opens it, writes and closes commits, as natively the create made the
// file and that close shows its bytes (TestModel seed 401229706001).
func TestNewFileOtherWriterCommits(t *testing.T) {
	p := newProc(t)
	newFile(p)
	other := p.open(Open{Write: true, Truncate: true, Opener: 2})
	p.write(other, 5, 0)
	if !p.w.FlushStart(other) {
		t.Fatal("the writer's close has nothing to commit")
	}
	if a := p.w.Flush(other, FlushFacts{}); a != FlushCommit {
		t.Fatalf("the writer's close: %v, want %v (the creating handle wrote nothing)", a, FlushCommit)
	}
}
