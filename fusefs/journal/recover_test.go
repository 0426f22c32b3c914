package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
)

// outcome is what a crash left of a change whose intent had no end.
type outcome int

const (
	happened  outcome = iota // the change was made
	notMade                  // it was not
	overtaken                // it was made, and then changed from outside
)

func (o outcome) String() string { return [...]string{"happened", "not made", "overtaken"}[o] }

// crashCase is one kind of change, as a crash can leave it: begin
// appends its intent (and keeps what it keeps) as the producer does;
// change makes it; outside changes its names after it.
type crashCase struct {
	name    string
	setup   func(t *testing.T, b *backing)
	begin   func(t *testing.T, b *backing, j *Journal) uint64
	change  func(t *testing.T, b *backing, seq uint64)
	outside func(t *testing.T, b *backing)
	kept    string // what kept/<seq> holds once done: file content, "dir", or "" for nothing
}

func mv(t *testing.T, b *backing, from, to string) {
	t.Helper()
	must(t, os.Rename(filepath.Join(b.path, from), filepath.Join(b.path, to)))
}

// keptPath is the path of change seq's entry in kept/: kept/<seq>, or its
// described name (described.go) where its group (groups.go) or kept/ has
// one.
func (b *backing) keptPath(seq uint64) string {
	for _, dir := range []string{b.jpath(keptName, jdir.GroupName(seq)), b.jpath(keptName)} {
		if m, _ := filepath.Glob(filepath.Join(dir, keptEntry(seq)+string(keptname.Sep)+"*")); len(m) == 1 {
			return m[0]
		}
	}
	return b.jpath(keptName, keptEntry(seq))
}

var crashCases = []crashCase{
	{
		name: "rewrite",
		setup: func(t *testing.T, b *backing) {
			b.write(t, "src/f", "old")
			b.write(t, "src/.realm-tmp-1", "new")
		},
		begin: func(t *testing.T, b *backing, j *Journal) uint64 {
			st := b.stat(t, "src/.realm-tmp-1")
			c, err := j.Begin(Record{Op: OpRewrite, Path: "src/f", Before: ObjectOf(b.stat(t, "src/f")), After: &ID{st.Dev, st.Ino}}, b.pathFd(t, "src/f"))
			must(t, err)
			return c.Seq()
		},
		change:  func(t *testing.T, b *backing, _ uint64) { mv(t, b, "src/.realm-tmp-1", "src/f") },
		outside: func(t *testing.T, b *backing) { b.write(t, "src/g", "theirs"); mv(t, b, "src/g", "src/f") },
		kept:    "old",
	},
	{
		name:  "unlink",
		setup: func(t *testing.T, b *backing) { b.write(t, "d/f", "gone") },
		begin: func(t *testing.T, b *backing, j *Journal) uint64 {
			rec := Record{Op: OpUnlink, Path: "d/f", Before: ObjectOf(b.stat(t, "d/f")), Kept: true}
			_, _, err := j.appendIntent(&rec, false) // Remove's first step
			must(t, err)
			return rec.Seq
		},
		change: func(t *testing.T, b *backing, seq uint64) {
			must(t, os.Rename(filepath.Join(b.path, "d/f"), b.keptPath(seq)))
		},
		outside: func(t *testing.T, b *backing) { b.write(t, "d/f", "theirs") },
		kept:    "gone",
	},
	{
		name:  "rmdir",
		setup: func(t *testing.T, b *backing) { must(t, os.MkdirAll(filepath.Join(b.path, "d/e"), 0o750)) },
		begin: func(t *testing.T, b *backing, j *Journal) uint64 {
			rec := Record{Op: OpRmdir, Path: "d/e", Before: ObjectOf(b.stat(t, "d/e")), Kept: true}
			_, _, err := j.appendIntent(&rec, false)
			must(t, err)
			return rec.Seq
		},
		change: func(t *testing.T, b *backing, seq uint64) {
			must(t, os.Rename(filepath.Join(b.path, "d/e"), b.keptPath(seq)))
		},
		outside: func(t *testing.T, b *backing) { must(t, os.Mkdir(filepath.Join(b.path, "d/e"), 0o755)) },
		kept:    "dir",
	},
	{
		name: "rename over a name",
		setup: func(t *testing.T, b *backing) {
			b.write(t, "a", "moved")
			b.write(t, "sub/b", "replaced")
		},
		begin: func(t *testing.T, b *backing, j *Journal) uint64 {
			rec := Record{Op: OpRename, Path: "a", To: "sub/b", Before: ObjectOf(b.stat(t, "a")), Replaced: ObjectOf(b.stat(t, "sub/b"))}
			c, err := j.Begin(rec, b.pathFd(t, "sub/b"))
			must(t, err)
			return c.Seq()
		},
		change:  func(t *testing.T, b *backing, _ uint64) { mv(t, b, "a", "sub/b") },
		outside: func(t *testing.T, b *backing) { mv(t, b, "sub/b", "c") },
		kept:    "replaced",
	},
	{
		name:  "mkdir",
		setup: func(t *testing.T, b *backing) {},
		begin: func(t *testing.T, b *backing, j *Journal) uint64 {
			c, err := j.Begin(Record{Op: OpMkdir, Path: "m"}, NoKeep)
			must(t, err)
			return c.Seq()
		},
		change: func(t *testing.T, b *backing, _ uint64) { must(t, os.Mkdir(filepath.Join(b.path, "m"), 0o755)) },
	},
}

// TestRecoveryByIdentity: an intent a crash left with no end is ended by
// what its names lead to at the next Open: where the change leaves them,
// done; where it found them, aborted, its kept link removed; elsewhere
// (changed from outside since), done, and nothing of BACKING touched.
func TestRecoveryByIdentity(t *testing.T) {
	for _, cc := range crashCases {
		for _, o := range []outcome{happened, notMade, overtaken} {
			if o == overtaken && cc.outside == nil {
				continue
			}
			t.Run(cc.name+"/"+o.String(), func(t *testing.T) {
				b := newBacking(t)
				cc.setup(t, b)
				j := b.open(t, Options{})
				seq := cc.begin(t, b, j)
				if o != notMade {
					cc.change(t, b, seq)
				}
				if o == overtaken {
					cc.outside(t, b)
				}
				must(t, j.Close()) // as a kill -9: nothing more is appended
				tree := snapshot(t, b)

				j = b.open(t, Options{})
				rc := j.Recovery()
				wantEnd, counts := Done, [3]int{1, 0, 0}
				switch o {
				case notMade:
					wantEnd, counts = Aborted, [3]int{0, 1, 0}
				case overtaken:
					counts = [3]int{0, 0, 1}
				}
				if got := [3]int{rc.Done, rc.Aborted, rc.Outside}; got != counts {
					t.Errorf("recovery %+v, want done, aborted, outside = %v", rc, counts)
				}
				recs, err := j.Records(Filter{})
				must(t, err)
				if len(recs) != 1 || recs[0].End != wantEnd {
					t.Fatalf("records %+v, want one ended %s", recs, wantEnd)
				}
				if cc.name == "mkdir" && o == happened {
					st := b.stat(t, "m")
					if recs[0].After == nil || *recs[0].After != (ID{st.Dev, st.Ino}) {
						t.Errorf("the recovered end says after %v, want the directory made", recs[0].After)
					}
				}
				checkKept(t, b, seq, map[bool]string{true: cc.kept, false: ""}[wantEnd == Done])
				if got := snapshot(t, b); got != tree {
					t.Errorf("recovery changed BACKING:\n%s\nwas\n%s", got, tree)
				}
				must(t, j.Close())
				j = b.open(t, Options{})
				if rc := j.Recovery(); rc.Done+rc.Aborted+rc.Outside != 0 {
					t.Errorf("a second Open resolved again: %+v", rc)
				}
			})
		}
	}
}

// checkKept checks what kept/<seq> holds: content, "dir" for an empty
// directory, "" for nothing.
func checkKept(t *testing.T, b *backing, seq uint64, want string) {
	t.Helper()
	p := b.keptPath(seq)
	fi, err := os.Lstat(p)
	switch {
	case want == "" && err == nil:
		t.Errorf("kept/%d is there, want none", seq)
	case want == "" && errors.Is(err, os.ErrNotExist):
	case err != nil:
		t.Errorf("kept/%d: %v, want %q", seq, err, want)
	case want == "dir":
		if ents, err := os.ReadDir(p); !fi.IsDir() || err != nil || len(ents) != 0 {
			t.Errorf("kept/%d is not an empty directory", seq)
		}
	default:
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("kept/%d holds %q, want %q", seq, got, want)
		}
	}
}

// snapshot describes BACKING outside the journal: each name, its mode
// and its inode.
func snapshot(t *testing.T, b *backing) string {
	t.Helper()
	var out string
	err := filepath.Walk(b.path, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.path, p)
		if rel == DirName {
			return filepath.SkipDir
		}
		st := fi.Sys().(*syscall.Stat_t)
		out += rel + " " + fi.Mode().String() + " ino " + strconv.FormatUint(st.Ino, 10) + "\n"
		return nil
	})
	must(t, err)
	return out
}

// TestInterruptedPrune: a prune that wrote pruned and was killed before
// it removed everything is finished by the next Open.
func TestInterruptedPrune(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 1024})
	b.write(t, "f", "v")
	for range 20 {
		c, err := j.Begin(Record{Op: OpRewrite, Path: "f"}, b.pathFd(t, "f"))
		must(t, err)
		must(t, c.Done(nil))
	}
	if len(j.segs) < 3 {
		t.Fatalf("%d segments: the test wants several", len(j.segs))
	}
	cut := j.segs[1].last
	must(t, jdir.WritePruned(j.dir, cut))
	must(t, j.Close())

	j = b.open(t, Options{SegmentSize: 1024})
	rc := j.Recovery()
	if rc.SegmentsRemoved != 2 || rc.KeptRemoved != int(cut) {
		t.Errorf("recovery %+v, want 2 segments and %d kept objects removed", rc, cut)
	}
	if j.Pruned() != cut {
		t.Errorf("Pruned %d, want %d", j.Pruned(), cut)
	}
	recs, err := j.Records(Filter{})
	must(t, err)
	if len(recs) != 20-int(cut) || recs[0].Seq != cut+1 {
		t.Errorf("%d records from %d, want %d from %d", len(recs), recs[0].Seq, 20-cut, cut+1)
	}
	for seq := uint64(1); seq <= 20; seq++ {
		_, err := os.Lstat(b.keptPath(seq))
		if gone := errors.Is(err, os.ErrNotExist); gone != (seq <= cut) {
			t.Errorf("kept/%d: %v", seq, err)
		}
	}
}

// TestRecoveryFollowsRenames: an open intent is judged at the name the
// renames after it left: a symlink made in dK, then dK renamed to d5, is
// done whether the rename's end was lost too or written, and a rename
// that did not happen moves nothing. Before, the symlink's intent was
// judged at dK/s, found nothing, and was aborted, and undo left it.
func TestRecoveryFollowsRenames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rename string // "open", "ended", "not made"
	}{
		{"the rename's end lost too", "open"},
		{"the rename ended", "ended"},
		{"the rename not made", "not made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			must(t, os.Mkdir(filepath.Join(b.path, "dK"), 0o755))
			j := b.open(t, Options{})
			c, err := j.Begin(Record{Op: OpSymlink, Path: "dK/s"}, NoKeep)
			must(t, err)
			made := c.Seq()
			must(t, os.Symlink("target", filepath.Join(b.path, "dK/s")))
			r, err := j.Begin(Record{Op: OpRename, Path: "dK", To: "d5", Before: ObjectOf(b.stat(t, "dK"))}, NoKeep)
			must(t, err)
			if tc.rename != "not made" {
				mv(t, b, "dK", "d5")
			}
			if tc.rename == "ended" {
				must(t, r.Done(nil))
			}
			must(t, j.Close()) // as a kill -9
			j = b.open(t, Options{})
			defer j.Close()
			recs, err := j.Records(Filter{})
			must(t, err)
			where := map[bool]string{true: "dK/s", false: "d5/s"}[tc.rename == "not made"]
			st := b.stat(t, where)
			for _, rec := range recs {
				if rec.Seq == made && (rec.End != Done || rec.After == nil || *rec.After != (ID{st.Dev, st.Ino})) {
					t.Errorf("the symlink's record: end %s, after %v; want done, the symlink at %s", rec.End, rec.After, where)
				}
			}
		})
	}
}

// TestRecoveryMadeThenRemoved: a symlink made, then unlinked into kept/,
// and a kill -9 that lost both ends (and the removal's intent, where its
// described kept/ entry rebuilds it): the name is empty now, which alone
// reads as a make never done, and undo would put the symlink back and
// leave it (ci98). The removal's Before, at the name the make's carried
// to, is the symlink made: recovery ends the make done, naming it. An
// object of another type found there proves nothing: the make stays
// aborted.
func TestRecoveryMadeThenRemoved(t *testing.T) {
	for _, tc := range []struct {
		name               string
		describes, moveDir bool
		other              bool // a file at the name, not the symlink
		want               End
	}{
		{"the removal described", true, false, false, Done},
		{"the removal written", false, false, false, Done},
		{"its directory renamed between", true, true, false, Done},
		{"another type found there", true, false, true, Aborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			must(t, os.Mkdir(filepath.Join(b.path, "dK"), 0o755))
			j := b.open(t, Options{Durable: true})
			j.describes = tc.describes
			c, err := j.Begin(Record{Op: OpSymlink, Path: "dK/s"}, NoKeep)
			must(t, err)
			made, dir := c.Seq(), "dK"
			if tc.other {
				b.write(t, "dK/s", "a file")
			} else {
				must(t, os.Symlink("target", filepath.Join(b.path, "dK/s")))
			}
			st := b.stat(t, "dK/s")
			if tc.moveDir {
				_, err := j.Begin(Record{Op: OpRename, Path: "dK", To: "d5", Before: ObjectOf(b.stat(t, "dK"))}, NoKeep)
				must(t, err)
				mv(t, b, "dK", "d5")
				dir = "d5"
			}
			_, err = j.Remove(Record{Owner: "pid:2", Op: OpUnlink, Path: dir + "/s"}, b.dirFd(t, dir), "s")
			must(t, err)
			j.crash()

			j = b.open(t, Options{Durable: true})
			defer j.Close()
			recs, err := j.Records(Filter{})
			must(t, err)
			found := false
			for _, rec := range recs {
				if rec.Seq != made {
					continue
				}
				found = true
				if rec.End != tc.want || tc.want == Done && (rec.After == nil || *rec.After != (ID{st.Dev, st.Ino})) {
					t.Errorf("the symlink's record: end %s, after %v; want %s, naming ino %d", rec.End, rec.After, tc.want, st.Ino)
				}
			}
			if !found {
				t.Errorf("no record of the symlink (seq %d) in %d records", made, len(recs))
			}
		})
	}
}
