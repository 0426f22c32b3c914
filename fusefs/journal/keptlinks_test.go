package journal

import (
	"os"
	"testing"
)

// TestKeptLinks: the journal counts its kept/ links to an object by
// identity: one a rename over a name keeps, one an unlink moves into
// kept/, none once aborted or pruned; Open counts them again; a link moved
// out of kept/ behind the journal's back is not counted.
func TestKeptLinks(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	b.write(t, "a", "x")
	must(t, os.Link(b.path+"/a", b.path+"/b"))
	must(t, os.Link(b.path+"/a", b.path+"/c"))
	id := ObjectOf(b.stat(t, "a")).ID()
	count := func(step string, want uint32) {
		t.Helper()
		if got := j.KeptLinks(id.Dev, id.Ino); got != want {
			t.Errorf("after %s: KeptLinks %d, want %d", step, got, want)
		}
	}
	count("nothing kept", 0)

	// A rename of d over b keeps b's object (a's) by a link.
	b.write(t, "d", "y")
	c, err := j.Begin(Record{Owner: "o", Op: OpRename, Path: "d", To: "b", Replaced: ObjectOf(b.stat(t, "b"))}, b.pathFd(t, "b"))
	must(t, err)
	count("a rename's intent", 1)
	must(t, c.Abort())
	count("its abort", 0)
	c, err = j.Begin(Record{Owner: "o", Op: OpRename, Path: "d", To: "b", Replaced: ObjectOf(b.stat(t, "b"))}, b.pathFd(t, "b"))
	must(t, err)
	mv(t, b, "d", "b")
	must(t, c.Done(nil))
	count("a rename over b", 1)

	// c unlinked: moved into kept/.
	_, err = j.Remove(Record{Owner: "o", Op: OpUnlink, Path: "c"}, b.root, "c")
	must(t, err)
	count("an unlink of c", 2)
	if st := b.stat(t, "a"); st.Nlink-uint64(j.KeptLinks(id.Dev, id.Ino)) != 1 {
		t.Errorf("a has %d links, %d of them kept: want 1 name", st.Nlink, j.KeptLinks(id.Dev, id.Ino))
	}

	must(t, j.Close())
	j = b.open(t, Options{})
	count("a reopen", 2)

	// One moved out of kept/ (as an undo would) is no longer counted.
	recs, err := j.Records(Filter{})
	must(t, err)
	must(t, os.Rename(b.keptPath(recs[len(recs)-1].Seq), b.path+"/c"))
	count("kept/<seq> moved back to c", 1)

	st, err := j.Prune(Bounds{MaxBytes: 1})
	must(t, err)
	if st.Kept == 0 {
		t.Fatalf("prune removed no kept object: %+v", st)
	}
	count("a prune", 0)
	if left := j.keptLinks.Len(); left != 0 {
		t.Errorf("%d identities still mapped after the prune", left)
	}
}
