package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
)

// Inode numbers across commits. A commit gives the file a new backing
// inode; it is rekeyed: its node takes the new identity and keeps the inode
// number the kernel knows (FS.rekeyed), and that number becomes borrowed
// (FS.borrowed). The backing filesystem hands the freed number to the next
// object it makes (ext4 reuses the lowest free number of a block group at
// once), and that object, of any type, gets a number the mount makes up
// (newChild): two kernel inodes with one number would look like hard
// links to cp and tar. A made-up number is kept like a rekeyed file's, by
// the object's (dev, ino, generation) in FS.rekeyed, for as long as the
// kernel knows its node: every later lookup finds the same node, so a
// directory that is some process's cwd is never replaced under it (the
// kernel drops an entry whose lookup answers another node, and getcwd
// then fails). A retired node (Node.retire) leaves both maps and holds its
// successor's readers off passthrough (FS.holds). "Rekeyed" is said only of
// commits; a rename through the mount is "renamed" (renamelock.go).

func keyOf(st *unix.Stat_t) locks.Key { return locks.Key{Dev: st.Dev, Ino: st.Ino} }

// fileID names one backing file: its (dev, ino) and its generation, so that
// an inode number freed by a deleted file and given to a new one does not
// lead to the old file's node.
type fileID struct {
	key locks.Key
	gen uint64
}

// setRekeyed records that the object id is known to the kernel as node m,
// and that m's inode number, no longer its backing object's, is borrowed.
// m's earlier entry goes: lookups lead to a node only for what it stands
// for now (rekeyedNode).
func (f *FS) setRekeyed(id fileID, m *Node) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	f.setRekeyedLocked(id, m)
	f.borrowed[m.StableAttr().Ino] = m
}

// setRekeyedLocked records that id is known as m (rekeyedMu held); the
// caller marks m's number borrowed.
func (f *FS) setRekeyedLocked(id fileID, m *Node) {
	if f.rekeyed == nil {
		f.rekeyed = make(map[fileID]*Node)
		f.rekeyedBy = make(map[*Node]fileID)
	}
	if f.borrowed == nil {
		f.borrowed = make(map[uint64]*Node)
	}
	f.dropRekeyedLocked(m)
	f.rekeyed[id] = m
	f.rekeyedBy[m] = id
}

// dropRekeyedLocked removes m's entry from rekeyed; rekeyedMu is held.
func (f *FS) dropRekeyedLocked(m *Node) {
	if id, ok := f.rekeyedBy[m]; ok {
		if f.rekeyed[id] == m {
			delete(f.rekeyed, id)
		}
		delete(f.rekeyedBy, m)
	}
}

// borrowedBit marks the inode numbers the mount makes up for files whose
// own number is borrowed by a live node; backing filesystems do not hand
// out numbers that high.
const borrowedBit = 1 << 63

// madeUp returns the node for the object id when a live node borrows its
// backing inode number ino, nil when none does. The node is the one made
// for id before, while the kernel knows it; else mk makes one with a number
// of the mount's own, recorded like a rekeyed file's. All of it happens
// under rekeyedMu, so that two lookups of one name racing (a revalidation
// of an entry is not serialized by the kernel) answer one node: two made-up
// numbers would have the kernel drop the first node's entry.
func (f *FS) madeUp(id fileID, ino uint64, mk func(ino uint64) *fs.Inode) *fs.Inode {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.borrowed[ino] == nil {
		return nil
	}
	if m := f.rekeyed[id]; m != nil {
		return m.EmbeddedInode()
	}
	in := mk(borrowedBit | f.synthetic.Add(1))
	if m := asNode(in); m != nil {
		f.setRekeyedLocked(id, m)
		f.borrowed[in.StableAttr().Ino] = m
	}
	return in
}

// rekeyedNode returns the node the kernel knows the object id by, when that
// node's inode number is not the object's own: a file a commit rekeyed, or
// an object of any type whose number the mount made up (newChild). Without
// it, each lookup of such an object would make it a new node.
func (f *FS) rekeyedNode(id fileID) *Node {
	f.rekeyedMu.Lock()
	m := f.rekeyed[id]
	f.rekeyedMu.Unlock()
	if m != nil && m.key() != id.key {
		return nil // the node moved on to a later version
	}
	return m
}

// maxSucceeded bounds the commits remembered for catchUp; past it the
// record starts again (a node older than that gets ESTALE, as before).
const maxSucceeded = 4096

// succeeded records that a commit of this mount replaced the backing file
// old with new. Files are told apart by generation too: backing
// filesystems hand a freed inode number to the next new file at once.
func (f *FS) succeeded(old, new fileID) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.successors == nil || len(f.successors) >= maxSucceeded {
		f.successors = make(map[fileID]fileID)
	}
	f.successors[old] = new
}

// catchUp moves node n to the file now if commits of this mount replaced
// the file n stands for with now: a lookup made n for the old file while a
// commit renamed over it, too late for the commit to move n (replace moves
// the nodes it can find). Without it, n's next stat or open would answer
// ESTALE, and the kernel retries an open only once.
func (f *FS) catchUp(n *Node, now fileID) bool {
	was := n.fileID()
	f.rekeyedMu.Lock()
	k, ok := f.successors[was]
	for i := 0; ok && k != now && i < 16; i++ {
		k, ok = f.successors[k]
	}
	if !ok || k != now {
		f.rekeyedMu.Unlock()
		return false
	}
	// n keeps the inode number the kernel knows; the file it stood for no
	// longer has it, and a new file given it must not share it. Lookups of
	// the file now lead to n, as they do to a node the commit moved, unless
	// they lead to that node already.
	ino := n.StableAttr().Ino
	if f.rekeyed[now] == nil {
		f.setRekeyedLocked(now, n)
	} else {
		f.dropRekeyedLocked(n)
	}
	if ino&borrowedBit == 0 && f.borrowed[ino] == nil {
		f.borrowed[ino] = n
	}
	f.rekeyedMu.Unlock()
	n.setIdent(now.key.Dev, now.key.Ino, now.gen)
	return true
}

// forgetRekeyed drops the entries of a node the kernel has forgotten.
func (f *FS) forgetRekeyed(m *Node) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	f.dropRekeyedLocked(m)
	if f.borrowed[m.StableAttr().Ino] == m {
		delete(f.borrowed, m.StableAttr().Ino)
	}
}

// retired records that node m, standing for the backing file key, takes no
// new opens: lookups must not lead to it again. Its inode number becomes
// borrowed, so the node made for the file next gets a number of its own
// (two kernel inodes with one number would look like hard links to cp and
// tar), and that node's readers hold off passthrough for retireHold.
func (f *FS) retired(m *Node, key locks.Key) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.borrowed == nil {
		f.borrowed = make(map[uint64]*Node)
	}
	f.dropRekeyedLocked(m)
	f.borrowed[m.StableAttr().Ino] = m
	now := time.Now()
	if f.holds == nil {
		f.holds = make(map[locks.Key]int64)
	}
	for k, until := range f.holds {
		if until < now.UnixNano() {
			delete(f.holds, k)
		}
	}
	f.holds[key] = now.Add(retireHold).UnixNano()
}

// holdOf is when a new node for the backing file key may let readers pass
// through (see retired); 0 for most files.
func (f *FS) holdOf(key locks.Key) int64 {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	return f.holds[key]
}
