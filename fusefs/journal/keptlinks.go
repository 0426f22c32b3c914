package journal

import (
	"slices"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// The links kept/ holds to objects that may still have names: a file a
// rewrite or a rename replaced while another name, or an open descriptor,
// still holds it; a file unlinked (renamed into kept/) while open or while
// it has other names. Each is one more in the object's st_nlink than the
// workspace has names for it, which the mount takes away (KeptLinks):
// through the mount an unlinked open file's fstat says 0, a hard link's
// other name the links the workspace has.
//
// Journal.keptLinks maps an identity to the seqs of its kept/ entries (a
// []uint64 replaced whole, under mu, never changed in place; keptByseq
// the other way, under mu), so that
// KeptLinks reads it with no lock: a getattr of an object the journal
// keeps nothing of costs one map lookup. Directories are not counted (an
// rmdir's kept directory is no name of a directory in the workspace).

// noteKept notes kept/<seq>, a link to the object id.
func (j *Journal) noteKept(id ID, seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.noteKeptLocked(id, seq)
}

// noteKeptLocked is noteKept, under mu.
func (j *Journal) noteKeptLocked(id ID, seq uint64) {
	if j.keptByseq == nil {
		j.keptByseq = map[uint64]ID{}
	}
	j.keptByseq[seq] = id
	var seqs []uint64
	if v, ok := j.keptLinks.Load(id); ok {
		seqs = v.([]uint64)
	}
	j.keptLinks.Store(id, append(slices.Clip(seqs), seq))
}

// forgetKept notes that kept/<seq> is gone.
func (j *Journal) forgetKept(seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id, ok := j.keptByseq[seq]
	if !ok {
		return
	}
	delete(j.keptByseq, seq)
	v, ok := j.keptLinks.Load(id)
	if !ok {
		return
	}
	seqs := slices.DeleteFunc(slices.Clone(v.([]uint64)), func(s uint64) bool { return s == seq })
	if len(seqs) == 0 {
		j.keptLinks.Delete(id)
	} else {
		j.keptLinks.Store(id, seqs)
	}
}

// keptID is the identity of kept/<name> where it is no directory.
func keptID(kept int, name string) (ID, bool) {
	var st unix.Stat_t
	if dirfd.Lstat(kept, name, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return ID{}, false
	}
	return ID{st.Dev, st.Ino}, true
}

// fdID is the identity of the object fd holds.
func fdID(fd int) (ID, bool) {
	var st unix.Stat_t
	if dirfd.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return ID{}, false
	}
	return ID{st.Dev, st.Ino}, true
}

// KeptLinks is how many of the links of the object (dev, ino) are kept/'s,
// not a name in the workspace: what the mount takes from its st_nlink.
// Each is checked to be a link to that object still (an undo, or a prune,
// may have moved it meanwhile); only objects the journal keeps a link to
// cost more than a map lookup.
func (j *Journal) KeptLinks(dev, ino uint64) uint32 {
	v, ok := j.keptLinks.Load(ID{dev, ino})
	if !ok {
		return 0
	}
	var n uint32
	for _, seq := range v.([]uint64) {
		if id, ok := keptID(j.kept, keptEntry(seq)); ok && id == (ID{dev, ino}) {
			n++
		}
	}
	return n
}
