// Package keptlinks maps an object's identity (device, inode) to the seqs
// of the journal's kept/ entries that are links to it, so that the mount
// takes them from the object's st_nlink (fusefs/journal, KeptLinks). A
// getattr reads it for every object, a removal adds to it: both without
// an allocation for an object with one kept link, and a read takes only
// the read lock of one of many shards. It is pure: no system call.
//
// An Add is appended to a short list and put into the shards later, many
// at once (fold): a removal's request then writes memory it wrote just
// before, where a map's insert between a rename's kernel work and the
// next took several cache misses (2 µs of the removal's 30:
// docs/PERFORMANCE.md). Every read folds first, so it sees every Add that
// returned.
package keptlinks

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/realm-dev/realm/internal/lockorder"
)

// Key is an object's identity.
type Key struct{ Dev, Ino uint64 }

// shards spreads the table's locks: readers on several Ps rarely share one.
const shards = 64

// foldAt is how many Adds wait at most before they go into the shards.
const foldAt = 256

// A Table is safe for concurrent use; its zero value is empty.
type Table struct {
	// pending are the Adds not in the shards yet, in order; npending
	// their count, read without the lock by a reader that finds none.
	pendingMu lockorder.Mutex[lockorder.KeptLinksPendingMu]
	pending   []added
	npending  atomic.Int32
	shard     [shards]shard
}

// shard is one of a Table's maps and its lock.
type shard struct {
	mu lockorder.RWMutex[lockorder.KeptLinksMu]
	m  map[Key]links
	_  [64]byte // a shard's lock and another's on their own cache lines
}

// links is a key's seqs: the first, and any after it in more (a slice
// replaced whole, never changed in place, so that a reader may range over
// a copy of it outside the lock).
type links struct {
	first uint64
	more  []uint64
}

// added is an Add not folded yet.
type added struct {
	k     Key
	seq   uint64
	shard int
}

func (t *Table) of(k Key) int { return int((k.Ino ^ k.Dev*0x9e3779b97f4a7c15) % shards) }

// Add notes seq as a link to k.
func (t *Table) Add(k Key, seq uint64) {
	t.pendingMu.Lock()
	defer t.pendingMu.Unlock()
	t.pending = append(t.pending, added{k, seq, t.of(k)})
	if len(t.pending) >= foldAt {
		t.foldLocked()
		return
	}
	t.npending.Store(int32(len(t.pending)))
}

// fold puts the pending Adds into the shards.
func (t *Table) fold() {
	if t.npending.Load() == 0 {
		return
	}
	t.pendingMu.Lock()
	defer t.pendingMu.Unlock()
	t.foldLocked()
}

// foldLocked puts the pending Adds into the shards, a shard's at a time
// and each key's in the order they came. Under pendingMu.
func (t *Table) foldLocked() {
	p := t.pending
	slices.SortStableFunc(p, func(a, b added) int { return cmp.Compare(a.shard, b.shard) })
	for i := 0; i < len(p); {
		s := &t.shard[p[i].shard]
		s.mu.Lock()
		if s.m == nil {
			s.m = map[Key]links{}
		}
		for ; i < len(p) && &t.shard[p[i].shard] == s; i++ {
			s.add(p[i].k, p[i].seq)
		}
		s.mu.Unlock()
	}
	clear(p)
	t.pending = p[:0]
	t.npending.Store(0)
}

// add notes seq as a link to k in m. Under the shard's lock.
func (s *shard) add(k Key, seq uint64) {
	l, ok := s.m[k]
	if !ok {
		s.m[k] = links{first: seq}
		return
	}
	l.more = append(slices.Clip(l.more), seq)
	s.m[k] = l
}

// Remove forgets seq as a link to k.
func (t *Table) Remove(k Key, seq uint64) {
	t.fold()
	s := &t.shard[t.of(k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.m[k]
	switch {
	case !ok:
	case l.first == seq && len(l.more) == 0:
		delete(s.m, k)
	case l.first == seq:
		s.m[k] = links{first: l.more[0], more: slices.Clone(l.more[1:])}
	default:
		l.more = slices.DeleteFunc(slices.Clone(l.more), func(v uint64) bool { return v == seq })
		s.m[k] = l
	}
}

// Each calls f with each seq noted for k, and returns how many f said
// true of; with no lock held while f runs (it may make system calls).
func (t *Table) Each(k Key, f func(seq uint64) bool) int {
	t.fold()
	s := &t.shard[t.of(k)]
	s.mu.RLock()
	l, ok := s.m[k]
	s.mu.RUnlock()
	if !ok {
		return 0
	}
	n := 0
	if f(l.first) {
		n++
	}
	for _, seq := range l.more {
		if f(seq) {
			n++
		}
	}
	return n
}

// Len is how many keys have a link noted.
func (t *Table) Len() int {
	t.fold()
	n := 0
	for i := range t.shard {
		s := &t.shard[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
