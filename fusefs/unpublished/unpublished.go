// Package unpublished is a mount's table of created files whose names are
// not in BACKING yet: the file is its write's temp until the first commit
// publishes it (fusefs/writeengine, newfile.go), and the mount answers for
// the name meanwhile. Each request that reaches such a file or name other
// than through the creating write's own handles asks this table first and
// has the file made real (fusefs's contacts); the table is empty whenever
// no create is in flight, which the requests check without a lock.
package unpublished

import (
	"context"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// Name is a name in a directory, the directory known by its backing
// identity (it keeps it across renames).
type Name struct {
	Dir  locks.Key
	Name string
}

// Entry is one unpublished file: the node the kernel knows it by, the
// lock-table key and owner of its write.
type Entry[N comparable] struct {
	Node  N
	Key   locks.Key
	Owner locks.Owner
}

// Table is the unpublished files of a mount, by name and by node. Its zero
// value is empty and ready.
type Table[N comparable] struct {
	n      atomic.Int32 // len(byNode), read without the lock
	mu     lockorder.Mutex[lockorder.UnpublishedMu]
	byName map[Name]Entry[N]
	byNode map[N]Name
}

// Empty reports, without a lock, whether no file is unpublished: the
// common case, in which a request has nothing to ask.
func (t *Table[N]) Empty() bool { return t.n.Load() == 0 }

// Add records e, to be published as name.
func (t *Table[N]) Add(name Name, e Entry[N]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName == nil {
		t.byName, t.byNode = make(map[Name]Entry[N]), make(map[N]Name)
	}
	if old, ok := t.byName[name]; ok {
		delete(t.byNode, old.Node)
	}
	t.byName[name] = e
	t.byNode[e.Node] = name
	t.n.Store(int32(len(t.byNode)))
}

// Remove forgets node's file (published, made real or gone); removing
// one not in the table does nothing.
func (t *Table[N]) Remove(node N) {
	t.mu.Lock()
	defer t.mu.Unlock()
	name, ok := t.byNode[node]
	if !ok {
		return
	}
	delete(t.byNode, node)
	if t.byName[name].Node == node {
		delete(t.byName, name)
	}
	t.n.Store(int32(len(t.byNode)))
}

// Named is the unpublished file to be named name, if any.
func (t *Table[N]) Named(name Name) (Entry[N], bool) {
	if t.Empty() {
		return Entry[N]{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byName[name]
	return e, ok
}

// Of is node's unpublished file, if it stands for one.
func (t *Table[N]) Of(node N) (Entry[N], bool) {
	if t.Empty() {
		return Entry[N]{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	name, ok := t.byNode[node]
	if !ok {
		return Entry[N]{}, false
	}
	return t.byName[name], true
}

// In lists the unpublished files to be named in the directory dir; every
// one if all.
func (t *Table[N]) In(dir locks.Key, all bool) []Entry[N] {
	if t.Empty() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var es []Entry[N]
	for name, e := range t.byName {
		if all || name.Dir == dir {
			es = append(es, e)
		}
	}
	return es
}

// MakeReal makes e's file real for a request that reached it; a refusal
// of its place is that request's answer (fusefs: writeengine's
// Engine.MakeReal).
type MakeReal[N comparable] func(ctx context.Context, e Entry[N]) syscall.Errno

// ContactNode makes node's file real, if it is unpublished.
func (t *Table[N]) ContactNode(ctx context.Context, node N, makeReal MakeReal[N]) syscall.Errno {
	if e, ok := t.Of(node); ok {
		return makeReal(ctx, e)
	}
	return 0
}

// ContactName makes the file to be named name real, if there is one.
func (t *Table[N]) ContactName(ctx context.Context, name Name, makeReal MakeReal[N]) syscall.Errno {
	if e, ok := t.Named(name); ok {
		return makeReal(ctx, e)
	}
	return 0
}

// ContactWhere makes real the files whose node pick says so, up to the
// first refusal. pick runs without the table's lock (a leaf of the lock
// order): it may take the node tree's.
func (t *Table[N]) ContactWhere(ctx context.Context, pick func(N) bool, makeReal MakeReal[N]) syscall.Errno {
	for _, e := range t.In(locks.Key{}, true) {
		if !pick(e.Node) {
			continue
		}
		if errno := makeReal(ctx, e); errno != 0 {
			return errno
		}
	}
	return 0
}

// ContactBeneath makes real the files whose inodes (inode) are beneath
// the directory dir, every one if dir is nil: go-fuse's parents of each,
// up to root, hold dir, or end detached. It takes go-fuse's tree locks.
func (t *Table[N]) ContactBeneath(ctx context.Context, dir, root *fs.Inode, inode func(N) *fs.Inode, makeReal MakeReal[N]) syscall.Errno {
	return t.ContactWhere(ctx, func(n N) bool {
		if dir == nil {
			return true
		}
		lockorder.GoFuse("Inode.Parent")
		for in := inode(n); in != root; {
			if _, in = in.Parent(); in == nil || in == dir {
				return true
			}
		}
		return false
	}, makeReal)
}

// ContactDir makes real the files to be named in the directory dir, up
// to the first refusal.
func (t *Table[N]) ContactDir(ctx context.Context, dir locks.Key, makeReal MakeReal[N]) syscall.Errno {
	for _, e := range t.In(dir, false) {
		if errno := makeReal(ctx, e); errno != 0 {
			return errno
		}
	}
	return 0
}
