package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/fusefs/inodes"
	"github.com/realm-dev/realm/fusefs/nodeopens"
	"github.com/realm-dev/realm/fusefs/reclock"
	"github.com/realm-dev/realm/locks"
)

// Inode numbers across commits are package inodes' table (FS.inos): a
// rekeyed file's node keeps the number the kernel knows, which becomes
// borrowed, and an object given a borrowed number gets one the mount makes
// up. Here are the adapters, which tell the table each node's inode number
// (go-fuse's StableAttr) and make the nodes it asks for.

// fileID names one backing file over time (locks.FileID).
type fileID = locks.FileID

// borrowedBit marks the inode numbers the mount makes up.
const borrowedBit = inodes.BorrowedBit

// setRekeyed records that the object id is known to the kernel as node m,
// whose inode number is now borrowed (inodes.Table.Rekeyed).
func (f *FS) setRekeyed(id fileID, m *Node) { f.inos.Rekeyed(id, m, m.StableAttr().Ino) }

// madeUp returns the node for the object id when a live node borrows its
// backing inode number ino, nil when none does: the one made for id before,
// else one mk makes with a number of the mount's own (inodes.Table.MadeUp).
func (f *FS) madeUp(id fileID, ino uint64, mk func(ino uint64) *fs.Inode) *fs.Inode {
	var made *fs.Inode
	m, ok := f.inos.MadeUp(id, ino, func(ino uint64) (*Node, uint64) {
		made = mk(ino)
		m := asNode(made)
		if m == nil {
			return nil, 0
		}
		return m, made.StableAttr().Ino
	})
	switch {
	case made != nil:
		return made
	case ok:
		return m.EmbeddedInode()
	}
	return nil
}

// rekeyedNode returns the node the kernel knows the object id by, when that
// node's inode number is not the object's own (inodes.Table.Node), and the
// node still stands for it.
func (f *FS) rekeyedNode(id fileID) *Node {
	m, _ := f.inos.Node(id)
	if m != nil && m.key() != id.Key {
		return nil // the node moved on to a later version
	}
	return m
}

// succeeded records that a commit of this mount replaced the backing file
// old with new (for catchUp).
func (f *FS) succeeded(old, new fileID) { f.inos.Succeeded(old, new) }

// catchUp moves node n to the file now if commits of this mount replaced
// the file n stands for with now (inodes.Table.CatchUp): a lookup made n
// for the old file while a commit renamed over it.
func (f *FS) catchUp(n *Node, now fileID) bool {
	if !f.inos.CatchUp(n, n.StableAttr().Ino, n.FileID(), now) {
		return false
	}
	n.setIdent(now.Key.Dev, now.Key.Ino, now.Gen)
	return true
}

// forgetRekeyed drops the entries of a node the kernel has forgotten.
func (f *FS) forgetRekeyed(m *Node) { f.inos.Forget(m, m.StableAttr().Ino) }

// retired records that node m, standing for the backing file key, takes no
// new opens, and that the next node for the file holds its readers off
// passthrough for nodeopens.RetireHold (inodes.Table.Retired).
func (f *FS) retired(m *Node, key locks.Key) {
	f.inos.Retired(m, m.StableAttr().Ino, key, nodeopens.RetireHold)
}

// bequeath offers n's lock set to the nodes that replace it: nodes born as
// the backing file key, which n stood for when it was retired.
func (f *FS) bequeath(n *Node, key locks.Key) { f.heirs.Bequeath(key, n.lockSet()) }

// dropLockSet is a node's forget: the last node of a set closes its fds.
func (f *FS) dropLockSet(l *reclock.Set) { f.releaseAll(f.heirs.Forget(l)) }

// releaseAll releases the charges of fds closed.
func (f *FS) releaseAll(cs []reclock.Charge) {
	for _, c := range cs {
		if c.Owner != "" {
			f.fds.Release(c.Owner, c.N)
		}
	}
}
