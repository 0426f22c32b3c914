package journal

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
	"github.com/realm-dev/realm/fusefs/journal/seqtable"
	"github.com/realm-dev/realm/internal/lockorder"
)

// A removal's kept/ entry says what it removed: the object an unlink or
// an rmdir takes from the workspace is renamed to
//
//	kept/SEQ~OWNER~OWNER_START~SESSION~PATH
//
// each field with "%", "/" and "~" escaped as %XX (package keptname).
// The rename is then the change and its record at once: there is no
// moment at which the object has left its name and no record of it is
// durable, so the intent need not be on the device before the rename. Remove holds it with the ends
// (ends.go) and writes it with the next line: no pwrite of its own, no
// write-through, no flush (docs/PERFORMANCE.md: a fifth of the daemon's
// CPU on an rm -rf). A kill -9 of the daemon or a power loss that loses
// the held lines leaves the entry; Open rebuilds the intent from its name
// (what the name does not hold: the time, from the object's ctime, which
// the rename set; the object, from its stat, which the rename left alone)
// and ends it as any intent with no end, by what the path leads to.
//
// That holds where a rename is atomic across a crash: on a filesystem
// that journals its metadata (ext4 with a journal, as Options.Ordered
// says; XFS; btrfs), or where no durability is promised (without
// Options.Durable: a kill -9 loses no rename half made). Elsewhere (ext4
// with no journal, where a power loss can leave the object at neither
// name, or at both), and for a removal whose fields do not fit in a name
// (statfs's f_namelen), a removal takes the plain kept/SEQ, its intent
// appended and settled before the rename as every other change's.

// keptFilesystem is what described entries need to know of the
// filesystem of kept/ (dir), from one statfs: the longest name it takes
// (f_namelen: 255 on ext4, XFS and btrfs, less on some; at most
// NAME_MAX), and whether it journals its metadata whatever its options
// (XFS, btrfs), so that a rename on it is whole or not made after a
// crash. ext4's journal is optional, and read apart (Options.Ordered).
func keptFilesystem(dir int) (nameMax int, renamesAtomic bool) {
	var st unix.Statfs_t
	if dirfd.Fstatfs(dir, &st) != nil {
		return unix.NAME_MAX, false
	}
	nameMax = unix.NAME_MAX
	if st.Namelen > 0 {
		nameMax = int(min(st.Namelen, unix.NAME_MAX))
	}
	return nameMax, st.Type == unix.XFS_SUPER_MAGIC || st.Type == unix.BTRFS_SUPER_MAGIC
}

// describedFields are what the removal rec's described entry says.
func describedFields(rec *Record) keptname.Fields {
	return keptname.Fields{Owner: rec.Owner, OwnerStart: rec.OwnerStart, Session: rec.Session, Path: rec.Path}
}

// describedIntent is the removal's intent the described entry e and its
// stat st say.
func describedIntent(e *keptname.Entry, st *unix.Stat_t) line {
	op := OpUnlink
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		op = OpRmdir
	}
	return line{
		Seq: e.Seq, Time: time.Unix(st.Ctim.Unix()).UTC(),
		Owner: e.Owner, OwnerAt: e.OwnerStart, Session: e.Session,
		Op: op, Path: pathJSON(e.Path), Kept: true, Before: ObjectOf(st),
	}
}

// describedNames are the described kept/ entries' names by seq, for
// keptName. A table under a lock of its own: a sync.Map's Store, once a
// removal, allocated three objects and cost 3.5 µs of its 32, and a map's
// insert a microsecond (docs/PERFORMANCE.md); the readers (a prune's
// removals, KeptLinks of an object the journal keeps a link to, undo)
// are few.
type describedNames struct {
	mu    lockorder.Mutex[lockorder.DescribedMu]
	names seqtable.Table[string]
}

// Store notes name as seq's described entry.
func (d *describedNames) Store(seq uint64, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names.Store(seq, name)
}

// Load is seq's described entry, if one was noted.
func (d *describedNames) Load(seq uint64) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.names.Load(seq)
}

// Delete forgets seq's described entry.
func (d *describedNames) Delete(seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names.Delete(seq)
}
