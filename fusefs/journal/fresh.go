package journal

// Fresh objects: what an owner made through the journal (create, mkdir,
// symlink, mknod: their intents made durable before the object was made,
// or written through for the flush that comes before anything durable is
// made of the object: flush.go)
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

// maxFresh bounds the fresh objects remembered (a few MiB): past it one is
// forgotten, whose records are then synced as any other's.
const maxFresh = 1 << 16

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
		delete(t.fresh, rec.Replaced.ID())
	}
	if rec.Before == nil {
		return false
	}
	id := rec.Before.ID()
	maker, ok := t.fresh[id]
	if !ok {
		return false
	}
	if maker != t.freshOwners[freshOwner{rec.Owner, rec.OwnerStart}] || !lazyOps[rec.Op] {
		delete(t.fresh, id)
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
		delete(t.fresh, *c.before)
	}
	if after == nil {
		after = c.after
	}
	if after == nil || !(madeOps[c.op] || c.op == OpRewrite && c.lazy) {
		return
	}
	if len(t.fresh) >= maxFresh {
		for k := range t.fresh { // any one
			delete(t.fresh, k)
			break
		}
	}
	t.fresh[*after] = t.freshNumber(c.owner)
}

// freshOwner is who an object is fresh for: the owner and its incarnation
// (Record.OwnerStart), so that a later session given the same id does not
// inherit an ended one's objects unsynced.
type freshOwner struct{ owner, start string }

// maxFreshOwners bounds the owners numbered (freshNumber): past it every
// fresh object is forgotten and the numbering starts again.
const maxFreshOwners = 1 << 12

// freshNumber is o's number in the fresh table, given it here if it has
// none. The table holds numbers, not owners' names, so that it holds no
// pointer: the garbage collector has nothing to scan in its 65,536
// entries, and a change allocates no name for it. Under mu.
func (t *tail) freshNumber(o freshOwner) uint32 {
	if n, ok := t.freshOwners[o]; ok {
		return n
	}
	if len(t.freshOwners) >= maxFreshOwners {
		clear(t.fresh) // forgotten: their records are synced as any other's
		clear(t.freshOwners)
	}
	n := uint32(len(t.freshOwners) + 1) // 0: no owner's
	t.freshOwners[o] = n
	return n
}
