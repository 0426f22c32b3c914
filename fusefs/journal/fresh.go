package journal

import "github.com/realm-dev/realm/fusefs/journal/makers"

// Fresh objects: what an owner made through the journal (create, mkdir,
// symlink, mknod: their intents made durable before the object was made,
// or written through for the flush that comes before anything durable is
// made of the object: package logsync)
// and has changed since with no other owner's record in between. Undoing
// the making removes the object, whatever was done to it after, so the
// records of the owner's later changes to it (a setattr, a rewrite, an
// append, its removal) need no fdatasync of their own (Options.Durable):
// they are appended before the change, as every record is (a kill -9
// keeps the page cache), and made durable by the next sync. After a power
// loss one may be missing; the object's making is not, and undoing it
// still removes the object, or finds an identity it did not leave at the
// name and reports a conflict, never touching what it does not know.
//
// Only the owner that made an object sees it fresh, in the incarnation that
// made it (a session id given again is another owner: freshOwner); another owner's record
// of it ends that (its change is undone apart, so it must be durable
// before it is made), as do a rename and a link (a name the making's undo
// would not find).

// maxFresh bounds the fresh objects remembered (about 2 MiB): past it one
// is forgotten, whose records are then synced as any other's; past
// maxFreshOwners owners, all are (package makers).
const maxFresh, maxFreshOwners = 1 << 16, 1 << 12

// lazyOps are the ops whose records an object's maker need not sync.
var lazyOps = map[Op]bool{
	OpChmod: true, OpChown: true, OpUtimens: true,
	OpRewrite: true, OpAppend: true, OpTruncate: true,
	OpUnlink: true, OpRmdir: true,
}

// madeOps are the ops that make an object, fresh once done.
var madeOps = map[Op]bool{OpCreate: true, OpMkdir: true, OpSymlink: true, OpMknod: true}

// freshFor reports whether rec's intent may go unsynced: a lazy op of an
// object its owner made. It forgets the objects rec names that another
// owner made, or that a name op moves. Under mu.
func (t *tail) freshFor(rec *Record) bool {
	if t.fresh == nil {
		return false
	}
	if rec.Replaced != nil {
		t.fresh.Forget(rec.Replaced.ID())
	}
	if rec.Before == nil {
		return false
	}
	id := rec.Before.ID()
	made, by := t.fresh.MadeBy(id, makers.Owner{Name: rec.Owner, Start: rec.OwnerStart})
	if !made {
		return false
	}
	if !by || !lazyOps[rec.Op] {
		t.fresh.Forget(id)
		return false
	}
	return true
}

// freshDone notes a change ended done: an object made is fresh for its
// owner, a rewrite of a fresh object leaves a fresh one, a removal
// forgets it. Under mu.
func (t *tail) freshDone(c *Change, after *ID) {
	if t.fresh == nil {
		return
	}
	if c.before != nil && (c.op == OpRewrite || c.op == OpUnlink || c.op == OpRmdir) {
		t.freshGone(*c.before)
	}
	if after == nil {
		after = c.after
	}
	if after == nil || !(madeOps[c.op] || c.op == OpRewrite && c.lazy) {
		return
	}
	t.fresh.Made(*after, c.owner)
}

// freshGone forgets id, an object a change replaced or removed: what
// freshDone does at the end of a removal, which has no Change. Under mu.
func (t *tail) freshGone(id ID) {
	if t.fresh != nil {
		t.fresh.Forget(id)
	}
}
