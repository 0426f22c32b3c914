package fusefs

import (
	"github.com/realm-dev/realm/fusefs/reclock"
	"github.com/realm-dev/realm/locks"
)

// bequeath offers n's lock set to the nodes that replace it: nodes born as
// the backing file key, which n stood for when it was retired.
func (f *FS) bequeath(n *Node, key locks.Key) { f.heirs.Bequeath(key, n.lockSet()) }

// dropLockSet is a node's forget: the last node of a set closes its fds.
func (f *FS) dropLockSet(l *reclock.Set) { f.releaseAll(f.heirs.Forget(l)) }

// releaseAll releases the charges of fds closed.
func (f *FS) releaseAll(cs []reclock.Charge) {
	for _, c := range cs {
		if c.Owner != "" {
			f.fds.release(c.Owner, c.N)
		}
	}
}
