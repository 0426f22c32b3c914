package reclock

import (
	"syscall"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// LockerFds is what a locker's first lock on a file may open, and so is
// charged to the request's owner beforehand (Heirs.Fd): the locker's fd
// and the set's anchor.
const LockerFds = 2

// Heirs keeps a mount's lock sets: each node's, made at its first use
// (Of), and the sets retired nodes hand to the nodes that replace them:
// nodes born as the backing file the retired one stood for. Without it a
// locker on the old node and one on the new would each take their lock on
// a file of its own, and both would hold it. It counts the nodes sharing
// each set, so that the last one forgotten closes the set's fds, and gives
// back what the fds it closes were charged (Charges).
type Heirs struct {
	mu    lockorder.Mutex[lockorder.HeirsMu]
	heirs map[locks.Key]*Set
	// Charges takes back the descriptors charged to an owner for the fds
	// the sets open (fusefs: its fdbudget.Counts); nil if none are
	// charged.
	Charges interface{ Release(o locks.Owner, n int) }
}

// Place is a node's place among the lock sets: the backing file the node
// was born as (Born), and its set, made at first use (Heirs.Of) and shared
// with a retired predecessor born as the same file. The set is guarded by
// the Heirs' mu.
type Place struct {
	Born locks.Key
	set  *Set
}

// Of returns p's lock set, made at first use: the set of a retired node
// born as p's file, if one lives, else a new one. A node that go-fuse
// drops for one it knows already (a lookup of a known name) never holds
// one, so every set is dropped by the Forget of each node sharing it.
func (h *Heirs) Of(p *Place) *Set {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ofLocked(p)
}

// ofLocked is Of; mu is held.
func (h *Heirs) ofLocked(p *Place) *Set {
	if p.set == nil {
		if l := h.heirs[p.Born]; l != nil {
			l.nodes++
			p.set = l
		} else {
			p.set = &Set{nodes: 1}
		}
	}
	return p.set
}

// Bequeath offers p's set (made now if p has none), the set of a node
// retired while standing for the backing file key, to the nodes born as
// key from now on.
func (h *Heirs) Bequeath(p *Place, key locks.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.ofLocked(p)
	if h.heirs == nil {
		h.heirs = make(map[locks.Key]*Set)
	}
	h.heirs[key] = l
}

// Fd returns the lock fd of locker in p's set. A locker's first lock opens
// it from the set's anchor, itself made at the set's first lock from src,
// the fd withSrc hands over (the file's content as the request's handle
// sees it). Before that first lock, charge charges the request's owner
// LockerFds descriptors, or refuses with its errno; the owner "" is
// charged nothing. What was charged and not opened is given back at once.
func (h *Heirs) Fd(p *Place, locker uint64, withSrc func(func(src int) syscall.Errno) syscall.Errno, charge func() (locks.Owner, syscall.Errno)) (int, syscall.Errno) {
	l := h.Of(p)
	if fd, ok := l.has(locker); ok {
		return fd, 0
	}
	owner, errno := charge()
	if errno != 0 {
		return -1, errno
	}
	var fd, opened int
	errno = withSrc(func(src int) syscall.Errno {
		var errno syscall.Errno
		fd, opened, errno = l.fd(src, locker, owner)
		return errno
	})
	h.release([]charged{{owner, LockerFds - opened}})
	if errno != 0 {
		return -1, errno
	}
	return fd, 0
}

// Drop closes locker's fd in p's set, if p has one, which releases every
// lock it held: the handle the locker took them through was released.
func (h *Heirs) Drop(p *Place, locker uint64) {
	h.mu.Lock()
	l := p.set
	h.mu.Unlock()
	if l != nil {
		h.release(l.drop(locker))
	}
}

// Forget is the forget of p's node: the last node of a set closes its fds.
func (h *Heirs) Forget(p *Place) {
	h.mu.Lock()
	l := p.set
	if l == nil {
		h.mu.Unlock()
		return
	}
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
	if last {
		h.release(l.closeAll())
	}
}

// release gives back the charges of fds closed (or never opened).
func (h *Heirs) release(cs []charged) {
	for _, c := range cs {
		if c.owner != "" && h.Charges != nil {
			h.Charges.Release(c.owner, c.n)
		}
	}
}
