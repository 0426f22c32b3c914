package reclock

import (
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// Heirs hands a retired node's lock set to the nodes that replace it: nodes
// born as the backing file the retired one stood for. Without it a locker
// on the old node and one on the new would each take their lock on a file
// of its own, and both would hold it. It counts the nodes sharing each
// set, so that the last one forgotten closes the set's fds.
type Heirs struct {
	mu    lockorder.Mutex[lockorder.HeirsMu]
	heirs map[locks.Key]*Set
}

// Of returns the lock set for a node born as the backing file key: the set
// of a retired node born as that file, if one lives, else a new one.
func (h *Heirs) Of(key locks.Key) *Set {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.heirs[key]; l != nil {
		l.nodes++
		return l
	}
	return &Set{nodes: 1}
}

// Bequeath offers l, the set of a node retired while standing for the
// backing file key, to the nodes born as key from now on.
func (h *Heirs) Bequeath(key locks.Key, l *Set) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heirs == nil {
		h.heirs = make(map[locks.Key]*Set)
	}
	h.heirs[key] = l
}

// Forget is a node's forget of its set l: the last node of a set closes its
// fds, and the charges of those it closed are returned.
func (h *Heirs) Forget(l *Set) []Charge {
	h.mu.Lock()
	l.nodes--
	last := l.nodes == 0
	if last {
		for k, v := range h.heirs {
			if v == l {
				delete(h.heirs, k)
			}
		}
	}
	h.mu.Unlock()
	if !last {
		return nil
	}
	return l.closeAll()
}
