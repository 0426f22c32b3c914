// Package fdbudget is the daemon's descriptor budget: how many of its
// descriptors each owner holds, and whether it may take more.
//
// The daemon has a fixed number of descriptors (RLIMIT_NOFILE,
// fusefs.Options.FdLimit), and every handle on the mount holds some of
// them: one owner holding files open (or locked, or written) by the
// thousand would leave every other owner EMFILE. So every descriptor the
// daemon holds on an owner's behalf is charged to that owner (Counts), and
// released when closed. What is charged, and when a refusal is audited, is
// fusefs/admit's (fds.go); this package holds the arithmetic and the counts,
// and CountingFS, which charges the handles the kernel is given. It is a
// package of its own because none of it needs the node tree: an owner is a
// locks.Owner, a handle the kernel's number for it.
//
// An owner may take need more descriptors while (admit)
//
//	held+need <= perOwner                    (PerOwner: max_fds_per_owner)
//	held+need <= (pool - others) / 2         (Share)
//
// where others is what all other owners hold and pool is the limit less
// the daemon's reserve (reserve: its own descriptors, the lock owners'
// pidfd and fdinfo caches, the idle directory fds of fusefs's dircache.go
// and the requests in flight). An owner may so take at most half of what
// the others left: k owners that each take all they may leave pool/2^k,
// and a newcomer always finds room unless some ten owners each hold their
// share.
package fdbudget

import (
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// The daemon's reserve out of its descriptor limit, which no owner's
// charge may take (reserve).
const (
	// daemonFds: the mount, the root and its boundary fd, logs, the
	// watcher, the notifier's thread, /proc reads, a commit's own fds.
	daemonFds = 64
	// resolverFds: the two lock-owner resolvers (Options.Owners and the
	// pid resolver), each with its pidfd and fdinfo caches.
	resolverFds = 2 * (procinfo.DefaultCacheSize + procinfo.FdinfoCacheBound)
	// inFlightFds: descriptors requests in progress hold a moment (pinned
	// directory fds beyond the idle bound, an open's fd before its charge).
	inFlightFds = 128
)

// DirFdBound is the most idle directory fds the daemon keeps for a
// descriptor limit (fusefs's dircache.go): an eighth of it, between 64 and
// 4096.
func DirFdBound(limit int) int {
	return min(max(limit/8, 64), 4096)
}

// reserve is what of limit no owner may take; at most half of it.
func reserve(limit int) int {
	return min(daemonFds+resolverFds+inFlightFds+DirFdBound(limit), limit/2)
}

// Pool is what all owners together may hold under limit; 0 (no bound) if
// the limit is unknown.
func Pool(limit int) int {
	if limit <= 0 {
		return 0
	}
	return limit - reserve(limit)
}

// Refusal is the bound that refuses a charge: None, or which.
type Refusal int

const (
	None     Refusal = iota
	PerOwner         // the per-owner bound (max_fds_per_owner)
	Share            // half of what the other owners left of the pool
)

// admit says whether an owner holding held descriptors, while all owners
// hold total, may take need more under a per-owner bound perOwner and a
// pool for all owners (each 0: no bound); None if it may, else the bound
// that refuses.
func admit(held, total, need, perOwner, pool int) Refusal {
	if perOwner > 0 && held+need > perOwner {
		return PerOwner
	}
	if pool > 0 && held+need > (pool-(total-held))/2 {
		return Share
	}
	return None
}

// Counts is the descriptors charged per owner. The zero value bounds
// nothing; SetBounds sets the bounds before use.
type Counts struct {
	mu lockorder.Mutex[lockorder.FdCountsMu]
	// perOwner and pool are the bounds (admit), set before use.
	perOwner, pool int
	held           map[locks.Owner]int
	total          int
	// over: owners refused since they could last take one more (their
	// burst's refusal is reported first).
	over map[locks.Owner]bool
	// owners of the handles counted, by the kernel's file handle number.
	owners map[Handle]locks.Owner
	// checked: the owner an open's check resolved for a calling thread,
	// for the count of the open once answered (CountingFS).
	checked map[uint32]locks.Owner
}

// Handle names a handle the kernel was given: file and directory handles
// are numbered apart.
type Handle struct {
	Dir bool
	Fh  uint64
}

// SetBounds sets the per-owner bound and the pool (Pool) for all owners
// (0: no bound), once, before any other call.
func (c *Counts) SetBounds(perOwner, pool int) {
	c.perOwner, c.pool = perOwner, pool
}

// Bounded reports whether anything is counted.
func (c *Counts) Bounded() bool { return c.perOwner > 0 || c.pool > 0 }

// Take charges charge descriptors to o if admit lets it take need (at
// least charge); else it returns the refusing bound and whether it is the
// first refusal of o's burst.
func (c *Counts) Take(o locks.Owner, need, charge int) (r Refusal, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r = admit(c.held[o], c.total, need, c.perOwner, c.pool); r == None {
		c.chargeLocked(o, charge)
		return None, false
	}
	first = !c.over[o]
	if first {
		if c.over == nil {
			c.over = make(map[locks.Owner]bool)
		}
		c.over[o] = true
	}
	return r, first
}

// Charge charges n descriptors to o, admitted before (Take).
func (c *Counts) Charge(o locks.Owner, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chargeLocked(o, n)
}

func (c *Counts) chargeLocked(o locks.Owner, n int) {
	if c.held == nil {
		c.held = make(map[locks.Owner]int)
	}
	c.held[o] += n
	c.total += n
}

// Release gives n descriptors of o back; o's next refusal is a new burst
// once it could take one more.
func (c *Counts) Release(o locks.Owner, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(o, n)
}

func (c *Counts) releaseLocked(o locks.Owner, n int) {
	if n <= 0 || c.held[o] <= 0 {
		return
	}
	n = min(n, c.held[o])
	c.total -= n
	if c.held[o] -= n; c.held[o] == 0 {
		delete(c.held, o)
	}
	if admit(c.held[o], c.total, 1, c.perOwner, c.pool) == None {
		delete(c.over, o)
	}
}

// Checked notes o, the owner an open's check resolved for thread tid, for
// the count of the open's handle once answered (a thread has one open in
// flight): the open so resolves its owner once.
func (c *Counts) Checked(tid uint32, o locks.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked == nil {
		c.checked = make(map[uint32]locks.Owner)
	}
	c.checked[tid] = o
}

// checkedOwner takes the owner Checked noted for thread tid, if any.
func (c *Counts) checkedOwner(tid uint32) (locks.Owner, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.checked[tid]
	delete(c.checked, tid)
	return o, ok
}

// Opened charges handle k, just given to a process of owner o.
func (c *Counts) Opened(k Handle, o locks.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil {
		c.owners = make(map[Handle]locks.Owner)
	}
	c.chargeLocked(o, 1)
	c.owners[k] = o
}

// Released releases handle k.
func (c *Counts) Released(k Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[k]
	if !ok {
		return
	}
	delete(c.owners, k)
	c.releaseLocked(o, 1)
}
