package journal

import (
	"cmp"
	"strconv"
	"testing"
)

// TestFreshUnsynced: with Options.Durable, the records of an owner's
// changes to an object it made go unsynced (made durable by the next
// sync); another owner's change, a name op, or an object nobody made
// through the journal is synced before Begin returns.
func TestFreshUnsynced(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs after f's create (by session:1) is done: more
		// changes, then the one checked, by owner, of op.
		before    func(t *testing.T, j *Journal, f *Object)
		owner     string
		start     string // the owner's incarnation (the maker's is "1")
		op        Op
		wantSync  bool
		preexists bool // f was not made through the journal
	}{
		{name: "chmod by its maker", owner: "session:1", op: OpChmod},
		{name: "utimens by its maker", owner: "session:1", op: OpUtimens},
		{name: "rewrite by its maker", owner: "session:1", op: OpRewrite},
		{name: "chmod by another owner", owner: "session:2", op: OpChmod, wantSync: true},
		// A later session given the maker's id is another owner.
		{name: "chmod by another incarnation of its maker", owner: "session:1", start: "2", op: OpChmod, wantSync: true},
		{name: "rename by its maker", owner: "session:1", op: OpRename, wantSync: true},
		{name: "chmod of a file not made here", owner: "session:1", op: OpChmod, wantSync: true, preexists: true},
		{name: "chmod by its maker after another's", owner: "session:1", op: OpChmod, wantSync: true,
			before: func(t *testing.T, j *Journal, f *Object) {
				c, err := j.Begin(Record{Owner: "session:2", Op: OpChown, Path: "f", Before: f}, NoKeep)
				must(t, err)
				must(t, c.Done(nil))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			j := b.open(t, Options{Durable: true})
			if tc.preexists {
				b.write(t, "f", "")
			} else {
				c, err := j.Begin(Record{Owner: "session:1", OwnerStart: "1", Op: OpCreate, Path: "f"}, NoKeep)
				must(t, err)
				b.write(t, "f", "")
				id := ObjectOf(b.stat(t, "f")).ID()
				must(t, c.Done(&id))
			}
			f := ObjectOf(b.stat(t, "f"))
			if tc.before != nil {
				tc.before(t, j, f)
			}
			rec := Record{Owner: tc.owner, OwnerStart: cmp.Or(tc.start, "1"), Op: tc.op, Path: "f", Before: f}
			if tc.op == OpRename {
				rec.To = "g"
			}
			c, err := j.Begin(rec, NoKeep)
			must(t, err)
			j.mu.Lock()
			synced := j.durable == j.written
			j.mu.Unlock()
			if synced != tc.wantSync {
				t.Errorf("the record synced before Begin returned: %v, want %v", synced, tc.wantSync)
			}
			must(t, c.Done(nil))
		})
	}
}

// TestFreshAfterRewrite: a maker's rewrite of its fresh file leaves the
// new file fresh (a second commit goes unsynced too); its removal by
// Remove goes unsynced and forgets it.
func TestFreshAfterRewrite(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{Durable: true})
	c, err := j.Begin(Record{Owner: "session:1", Op: OpCreate, Path: "f"}, NoKeep)
	must(t, err)
	b.write(t, "f", "")
	id := ObjectOf(b.stat(t, "f")).ID()
	must(t, c.Done(&id))
	unsynced := func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.durable < j.written
	}
	for i, content := range []string{"one", "two"} {
		before := ObjectOf(b.stat(t, "f"))
		b.write(t, ".t", content)
		after := ObjectOf(b.stat(t, ".t")).ID()
		c, err := j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "f", Before: before, After: &after}, NoKeep)
		must(t, err)
		if !unsynced() {
			t.Errorf("rewrite %d of the maker's file was synced", i+1)
		}
		mv(t, b, ".t", "f")
		must(t, c.Done(nil))
	}
	if _, err := j.Remove(Record{Owner: "session:1", Op: OpUnlink, Path: "f"}, b.root, "f"); err != nil {
		t.Fatal(err)
	}
	if !unsynced() {
		t.Errorf("the removal of the maker's file was synced")
	}
	j.mu.Lock()
	n := len(j.fresh)
	j.mu.Unlock()
	if n != 0 {
		t.Errorf("%d fresh objects left after the removal, want 0", n)
	}
}

// TestFreshOwnersBounded: the owners the fresh table numbers are bounded;
// past maxFreshOwners every fresh object is forgotten (its records then
// synced as any other's), and no number given again leads a new owner to
// an object a forgotten owner made.
func TestFreshOwnersBounded(t *testing.T) {
	tl := tail{fresh: map[ID]uint32{}, freshOwners: map[freshOwner]uint32{}}
	made := func(i int) (freshOwner, ID) {
		return freshOwner{owner: "pid:" + strconv.Itoa(i), start: "1"}, ID{Dev: 1, Ino: uint64(i)}
	}
	isFresh := func(i int) bool {
		o, id := made(i)
		return tl.freshFor(&Record{Owner: o.owner, OwnerStart: o.start, Op: OpChmod, Before: &Object{Dev: id.Dev, Ino: id.Ino}})
	}
	for i := range maxFreshOwners {
		o, id := made(i)
		tl.freshDone(&Change{owner: o, op: OpCreate}, &id)
	}
	if len(tl.fresh) != maxFreshOwners || !isFresh(0) || !isFresh(maxFreshOwners-1) {
		t.Fatalf("within the bound: %d fresh objects, want %d, each fresh for its maker", len(tl.fresh), maxFreshOwners)
	}
	o, id := made(maxFreshOwners)
	tl.freshDone(&Change{owner: o, op: OpCreate}, &id)
	if len(tl.freshOwners) != 1 || len(tl.fresh) != 1 {
		t.Fatalf("past the bound: %d owners, %d fresh objects; want 1 and 1 (the rest forgotten)", len(tl.freshOwners), len(tl.fresh))
	}
	if !isFresh(maxFreshOwners) {
		t.Error("the object made past the bound is not fresh for its maker")
	}
	if isFresh(1) {
		t.Error("an object of a forgotten owner is still fresh")
	}
	// The new owner took number 1; an owner numbered 1 before the reset
	// (made(0)) has no number now, so its object (forgotten) stays so.
	o0, id0 := made(0)
	tl.freshDone(&Change{owner: o, op: OpCreate}, &id0)
	if tl.freshFor(&Record{Owner: o0.owner, OwnerStart: o0.start, Op: OpChmod, Before: &Object{Dev: id0.Dev, Ino: id0.Ino}}) {
		t.Error("an owner forgotten at the reset is taken for the owner given its old number")
	}
}
