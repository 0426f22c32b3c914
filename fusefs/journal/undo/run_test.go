package undo

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// world is a BACKING with a journal, changed as the mount's producers
// change it: each change's record, then its system call.
type world struct {
	t    *testing.T
	dir  string
	root int
	j    *journal.Journal
}

func newWorld(t *testing.T) *world {
	dir := t.TempDir()
	root, err := dirfd.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(root, journal.DefaultDir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir, root: root, j: j}
	t.Cleanup(func() { j.Close(); dirfd.Close(root) })
	return w
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) p(name string) string { return filepath.Join(w.dir, name) }

// obj is name's object as the mount records it: its stat and generation.
func (w *world) obj(name string) *journal.Object {
	var st unix.Stat_t
	gen, err := dirfd.Statx(w.root, name, &st)
	w.must(err)
	o := journal.ObjectOf(&st)
	o.Gen = gen
	return o
}

func (w *world) pathFd(name string) int {
	fd, err := unix.Open(w.p(name), unix.O_PATH|unix.O_NOFOLLOW, 0)
	w.must(err)
	return fd
}

func (w *world) create(owner, name, body string) {
	c, err := w.j.Begin(journal.Record{Owner: owner, Op: journal.OpCreate, Path: name}, journal.NoKeep)
	w.must(err)
	w.must(os.WriteFile(w.p(name), []byte(body), 0o644))
	id := w.obj(name).ID()
	w.must(c.Done(&id))
}

func (w *world) rewrite(owner, name, body string) {
	tmp := name + ".tmp"
	w.must(os.WriteFile(w.p(tmp), []byte(body), 0o644))
	after := w.obj(tmp).ID()
	keep := w.pathFd(name)
	defer unix.Close(keep)
	c, err := w.j.Begin(journal.Record{Owner: owner, Op: journal.OpRewrite, Path: name, Before: w.obj(name), After: &after}, keep)
	w.must(err)
	w.must(os.Rename(w.p(tmp), w.p(name)))
	w.must(c.Done(nil))
}

func (w *world) remove(owner, name string, op journal.Op) {
	dir, err := dirfd.OpenRoot(filepath.Dir(w.p(name)))
	w.must(err)
	defer dirfd.Close(dir)
	_, err = w.j.Remove(journal.Record{Owner: owner, Op: op, Path: name}, dir, filepath.Base(name))
	w.must(err)
}

func (w *world) rename(owner, from, to string) {
	rec := journal.Record{Owner: owner, Op: journal.OpRename, Path: from, To: to, Before: w.obj(from)}
	keep := journal.NoKeep
	if _, err := os.Lstat(w.p(to)); err == nil {
		rec.Replaced = w.obj(to)
		keep = w.pathFd(to)
		defer unix.Close(keep)
	}
	c, err := w.j.Begin(rec, keep)
	w.must(err)
	w.must(os.Rename(w.p(from), w.p(to)))
	w.must(c.Done(nil))
}

func (w *world) mkdir(owner, name string) {
	c, err := w.j.Begin(journal.Record{Owner: owner, Op: journal.OpMkdir, Path: name}, journal.NoKeep)
	w.must(err)
	w.must(os.Mkdir(w.p(name), 0o755))
	id := w.obj(name).ID()
	w.must(c.Done(&id))
}

// chmod records and makes a chmod as the mount does (its end carrying
// the ctime the change left: fusefs/journaling's EndMeta).
func (w *world) chmod(owner, name string, mode os.FileMode) {
	c, err := w.j.Begin(journal.Record{Owner: owner, Op: journal.OpChmod, Path: name, Before: w.obj(name)}, journal.NoKeep)
	w.must(err)
	w.must(os.Chmod(w.p(name), mode))
	w.must(c.DoneCtime(w.obj(name).Ctime))
}

// tree is the names, modes and contents beneath the world's BACKING.
func (w *world) tree() string {
	var lines []string
	w.must(filepath.Walk(w.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.dir, p)
		if rel == journal.DirName {
			return filepath.SkipDir
		}
		line := rel + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		lines = append(lines, line)
		return nil
	}))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestRunPutsBack: every kind of change, undone, leaves the tree before;
// the undo, undone as its own owner, leaves the tree after.
func TestRunPutsBack(t *testing.T) {
	w := newWorld(t)
	w.must(os.WriteFile(w.p("keep"), []byte("kept\n"), 0o640))
	w.must(os.WriteFile(w.p("gone"), []byte("farewell\n"), 0o644))
	w.must(os.WriteFile(w.p("over"), []byte("replaced\n"), 0o644))
	w.must(os.Mkdir(w.p("dir"), 0o750))
	w.must(os.WriteFile(w.p("dir/in"), []byte("inside\n"), 0o644))
	before := w.tree()

	w.rewrite("A", "keep", "KEPT\n")
	w.chmod("A", "keep", 0o600)
	w.remove("A", "gone", journal.OpUnlink)
	w.create("A", "new", "fresh\n")
	w.rename("A", "new", "over")
	w.mkdir("A", "made")
	w.rename("A", "dir", "made/dir")
	w.remove("A", "made/dir/in", journal.OpUnlink)
	w.remove("A", "made/dir", journal.OpRmdir)
	changed := w.tree()

	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "A"}})
	w.must(err)
	if len(res.Conflicts) > 0 || len(res.Steps) != 9 {
		t.Fatalf("undo: %d steps, conflicts %v", len(res.Steps), res.Conflicts)
	}
	if got := w.tree(); got != before {
		t.Errorf("after the undo:\n%s\nwant the tree before:\n%s", got, before)
	}
	res, err = Run(w.root, w.j, Options{Window: Window{Owner: "undo:A"}})
	w.must(err)
	if len(res.Conflicts) > 0 {
		t.Fatalf("undo of the undo: conflicts %v", res.Conflicts)
	}
	if got := w.tree(); got != changed {
		t.Errorf("after the undo of the undo:\n%s\nwant the tree A left:\n%s", got, changed)
	}
}

// TestRunLeavesOutsideChanges: a file replaced from outside the mount
// since the owner's change (no record) is a conflict, left as it is; the
// owner's other changes are undone.
func TestRunLeavesOutsideChanges(t *testing.T) {
	w := newWorld(t)
	w.must(os.WriteFile(w.p("f"), []byte("one\n"), 0o644))
	w.must(os.WriteFile(w.p("g"), []byte("two\n"), 0o644))
	w.rewrite("A", "f", "A's\n")
	w.rewrite("A", "g", "A's\n")
	w.must(os.WriteFile(w.p("f.out"), []byte("outside\n"), 0o644))
	w.must(os.Rename(w.p("f.out"), w.p("f")))
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "A"}})
	w.must(err)
	if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "f" || !strings.Contains(res.Conflicts[0].Why, "from outside") {
		t.Errorf("conflicts %v, want f's, changed from outside", res.Conflicts)
	}
	for name, want := range map[string]string{"f": "outside\n", "g": "two\n"} {
		if b, _ := os.ReadFile(w.p(name)); string(b) != want {
			t.Errorf("%s: %q, want %q", name, b, want)
		}
	}
}

// TestUndoStandInWithTheOldNumber: sed -i's temp is made empty, chmodded,
// then rewritten; the empty version is not kept, so undo makes a new empty
// file for it, and ext4 may give that one the number the rewrite freed.
// The chmod's undo took undo's own stand-in for an object made since from
// outside (its generation, not the record's) and left the temp behind, a
// conflict. Run until the filesystem reuses the number (it does not on
// every attempt); every attempt must undo cleanly.
func TestUndoStandInWithTheOldNumber(t *testing.T) {
	w := newWorld(t)
	reused := 0
	for i := 0; i < 64 && reused < 3; i++ {
		owner, name := fmt.Sprintf("S%d", i), fmt.Sprintf("sed%d", i)
		w.create(owner, name, "")
		w.chmod(owner, name, 0o644)
		old := w.obj(name)
		w.must(os.WriteFile(w.p(name+".tmp"), []byte("new\n"), 0o644))
		after := w.obj(name + ".tmp").ID()
		c, err := w.j.Begin(journal.Record{Owner: owner, Op: journal.OpRewrite, Path: name, Before: old, After: &after}, journal.NoKeep)
		w.must(err)
		w.must(os.Rename(w.p(name+".tmp"), w.p(name)))
		w.must(c.Done(nil))

		res, err := Run(w.root, w.j, Options{Window: Window{Owner: owner}})
		w.must(err)
		if len(res.Conflicts) != 0 {
			t.Fatalf("attempt %d: undo: conflicts %v, want none", i, res.Conflicts)
		}
		if _, err := os.Lstat(w.p(name)); !os.IsNotExist(err) {
			t.Fatalf("attempt %d: %s is still there after its create was undone (%v)", i, name, err)
		}
		recs, err := w.j.Records(journal.Filter{Owner: "undo:" + owner})
		w.must(err)
		for _, r := range recs {
			if r.Op == journal.OpRewrite && r.After != nil && *r.After == old.ID() {
				reused++
			}
		}
	}
	if reused == 0 {
		t.Skipf("the filesystem of %s never gave undo's empty file the number the rewrite freed (not ext4?)", w.dir)
	}
	t.Logf("undo's empty file had the freed number in %d attempts", reused)
}
