package journal

import (
	"cmp"
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
	n := j.fresh.Len()
	j.mu.Unlock()
	if n != 0 {
		t.Errorf("%d fresh objects left after the removal, want 0", n)
	}
}
