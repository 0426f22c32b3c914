package journal

import (
	"slices"

	"github.com/realm-dev/realm/internal/lockorder"
)

// The links kept/ holds to objects that may still have names: a file a
// rewrite or a rename replaced while another name, or an open descriptor,
// still holds it; a file unlinked (renamed into kept/) while open or while
// it has other names. Each is one more in the object's st_nlink than the
// workspace has names for it, which the mount takes away (KeptLinks):
// through the mount an unlinked open file's fstat says 0, a hard link's
// other name the links the workspace has.
//
// Journal.links maps an identity to the seqs of its kept/ entries and
// back. Directories are not counted (an rmdir's kept directory is no name
// of a directory in the workspace).

// keptLinkTable is kept/'s links by identity, under a read-write lock of
// its own: every getattr reads it, every removal writes it. It was a
// sync.Map, whose boxing of the key and the value allocated three objects
// a removal (1.5 µs of its 20 in the daemon's profile, with the garbage
// collector's share besides: docs/PERFORMANCE.md).
type keptLinkTable struct {
	mu    lockorder.RWMutex[lockorder.KeptLinksMu]
	byID  map[ID]keptSeqs
	bySeq map[uint64]ID
}

// keptSeqs are the seqs of one object's kept/ links: the first held in
// place, so that a removal (mostly the only link kept of its object)
// allocates nothing but the maps' growth.
type keptSeqs struct {
	first uint64
	more  []uint64
}

// note notes kept/<seq>, a link to the object id.
func (t *keptLinkTable) note(id ID, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID, t.bySeq = map[ID]keptSeqs{}, map[uint64]ID{}
	}
	t.bySeq[seq] = id
	s, had := t.byID[id]
	if !had {
		t.byID[id] = keptSeqs{first: seq}
		return
	}
	s.more = append(s.more, seq)
	t.byID[id] = s
}

// forget notes that kept/<seq> is gone.
func (t *keptLinkTable) forget(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.bySeq[seq]
	if !ok {
		return
	}
	delete(t.bySeq, seq)
	s := t.byID[id]
	switch i := slices.Index(s.more, seq); {
	case s.first == seq && len(s.more) == 0:
		delete(t.byID, id)
		return
	case s.first == seq:
		s.first, s.more = s.more[0], s.more[1:]
	case i >= 0:
		s.more = append(s.more[:i:i], s.more[i+1:]...)
	}
	t.byID[id] = s
}

// seqs appends the seqs of id's kept/ links to buf.
func (t *keptLinkTable) seqs(id ID, buf []uint64) []uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.byID[id]
	if !ok {
		return buf
	}
	return append(append(buf, s.first), s.more...)
}
