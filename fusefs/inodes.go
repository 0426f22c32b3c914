package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"realm/fusefs/dirfd"
	"realm/locks"
)

// Inode numbers across commits. A commit gives the file a new backing
// inode; it is rekeyed: its node takes the new identity and keeps the inode
// number the kernel knows (FS.rekeyed), and that number becomes borrowed
// (FS.borrowed), so a new file the backing filesystem hands the freed
// number gets one the mount makes up. A retired node (Node.retire) leaves
// both maps and holds its successor's readers off passthrough (FS.holds).
// "Rekeyed" is said only of commits; a rename through the mount is
// "renamed" (renamelock.go).

func keyOf(st *unix.Stat_t) locks.Key { return locks.Key{Dev: st.Dev, Ino: st.Ino} }

// fileID names one backing file: its (dev, ino) and its generation, so that
// an inode number freed by a deleted file and given to a new one does not
// lead to the old file's node.
type fileID struct {
	key locks.Key
	gen uint64
}

// childInode is the node the kernel knows as name in directory n, if any.
func (n *Node) childInode(name string) *fs.Inode {
	if n == nil {
		return nil
	}
	return n.GetChild(name)
}

// setIdent records the backing object n now stands for, and its
// generation (dirfd.Statx).
func (n *Node) setIdent(dev, ino, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dev, n.ino, n.gen = dev, ino, gen
}

// fileID is the backing file n stands for, generation included.
func (n *Node) fileID() fileID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return fileID{locks.Key{Dev: n.dev, Ino: n.ino}, n.gen}
}

// setRekeyed records that the file id is known to the kernel as node m, and
// that m's inode number, no longer its backing file's, is borrowed.
func (f *FS) setRekeyed(id fileID, m *Node) {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	if f.rekeyed == nil {
		f.rekeyed = make(map[fileID]*Node)
		f.borrowed = make(map[uint64]*Node)
	}
	f.rekeyed[id] = m
	f.borrowed[m.StableAttr().Ino] = m
}

// borrowedBit marks the inode numbers the mount makes up for files whose
// own number is borrowed by a live node; backing filesystems do not hand
// out numbers that high.
const borrowedBit = 1 << 63

// isBorrowed reports whether a live node answers to inode number ino
// without its backing file having it.
func (f *FS) isBorrowed(ino uint64) bool {
	f.rekeyedMu.Lock()
	defer f.rekeyedMu.Unlock()
	return f.borrowed[ino] != nil
}

// rekeyedNode returns the node a commit left the regular file id under, if
// that node still stands for it.
func (f *FS) rekeyedNode(id fileID, mode uint32) *Node {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
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

// catchUp moves n to found, the file the caller found named name in pn, if
// it is what commits of this mount put in place of the file n stands for
// (FS.catchUp). A second look at the name gives the generation; it must
// still be found.
func (n *Node) catchUp(ctx context.Context, pn *Node, name string, found *unix.Stat_t) bool {
	pfd, errno := pn.dirFd(ctx)
	if errno != 0 {
		return false
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || keyOf(&st) != keyOf(found) {
		return false
	}
	return n.fsys.catchUp(n, fileID{keyOf(&st), gen})
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
	// longer has it, and a new file given it must not share it.
	if ino := n.StableAttr().Ino; ino&borrowedBit == 0 && f.borrowed[ino] == nil {
		if f.borrowed == nil {
			f.borrowed = make(map[uint64]*Node)
		}
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
	for k, v := range f.rekeyed {
		if v == m {
			delete(f.rekeyed, k)
		}
	}
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
	if f.rekeyed == nil {
		f.rekeyed = make(map[fileID]*Node)
		f.borrowed = make(map[uint64]*Node)
	}
	for k, v := range f.rekeyed {
		if v == m {
			delete(f.rekeyed, k)
		}
	}
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
