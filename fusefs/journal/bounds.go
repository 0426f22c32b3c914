package journal

// What the journal holds, counted as it keeps (docs/JOURNAL.md, Bounds):
// the bytes of its segments' and kept objects' blocks, and the files it
// holds (its segments and kept/'s entries: each an inode of BACKING's
// filesystem). Open sets both from what is on disk, weighed as Prune
// weighs; every segment made and every object kept adds to them, an
// aborted change's link and an object Restore moves out take from them,
// and each Prune sets them again from what it weighed, less what it
// drops. As soon as either passes its bound (the Bounds the last Prune
// was given) Grown is signalled: a prune then comes after as many
// changes as it takes the pruner to wake, never a segment or 4096
// changes later. Empty files weigh no blocks, so the files bound is what
// keeps an owner that makes and removes empty files from taking every
// inode.

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Bounds are what Prune holds the journal to. A bound ≤ 0 is none.
type Bounds struct {
	// MaxBytes bounds the blocks of the segments and of the kept objects
	// whose only link the journal holds (journal_max).
	MaxBytes int64
	// MaxFiles bounds the files it holds: its segments and kept/'s
	// entries (journal_max_files).
	MaxFiles int64
	// Keep bounds the age of a segment's newest record (journal_keep).
	Keep time.Duration
}

// over reports whether bytes or files pass b.
func (b Bounds) over(bytes, files int64) bool {
	return b.MaxBytes > 0 && bytes > b.MaxBytes || b.MaxFiles > 0 && files > b.MaxFiles
}

// Held is what the journal holds now, as counted: the bytes of its
// segments' and kept objects' blocks (as Prune weighs them) and the files
// (segments and kept objects).
func (j *Journal) Held() (bytes, files int64) {
	return j.heldBytes.Load(), j.heldFiles.Load()
}

// addHeld counts bytes and files more (less, negative) held, and signals
// Grown if they grew past the bounds.
func (j *Journal) addHeld(bytes, files int64) {
	b, f := j.heldBytes.Add(bytes), j.heldFiles.Add(files)
	if bytes <= 0 && files <= 0 {
		return
	}
	if bd := j.bounds.Load(); bd != nil && bd.over(b, f) {
		j.signalGrown()
	}
}

// keptWeight is what an object of st kept in kept/ adds to the count: its
// blocks, and one file. Its blocks are counted even while it has names
// elsewhere (Begin links it before the change that leaves the journal
// its only link): the next Prune weighs it as it is.
func keptWeight(st *unix.Stat_t) int64 { return st.Blocks * 512 }

// measure sets what the journal holds from segs, a weighing of it (Open).
func (j *Journal) measure(segs []pruneSeg) {
	var bytes, files int64
	for _, s := range segs {
		bytes += s.bytes
		files += s.files
	}
	j.heldBytes.Store(bytes)
	j.heldFiles.Store(files)
}

// Statfs is statfs(2) of the journal's filesystem (BACKING's).
func (j *Journal) Statfs(st *unix.Statfs_t) error { return dirfd.Fstatfs(j.dir, st) }
