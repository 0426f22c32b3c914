// Package inodes keeps the inode numbers the kernel knows across commits,
// and gives each backing object its number on the mount (Number).
// A commit gives the file a new backing inode; it is rekeyed: its node
// takes the new identity and keeps the inode number the kernel knows
// (Table.Rekeyed), and that number becomes borrowed. The backing
// filesystem hands the freed number to the next object it makes (ext4
// reuses the lowest free number of a block group at once), and that
// object, of any type, gets a number the mount makes up (Table.MadeUp):
// two kernel inodes with one number would look like hard links to cp and
// tar. A made-up number is kept like a rekeyed file's, by the object's
// (dev, ino, generation), for as long as the kernel knows its node: every
// later lookup finds the same node, so a directory that is some process's
// cwd is never replaced under it (the kernel drops an entry whose lookup
// answers another node, and getcwd then fails). A retired node leaves the
// table and holds its successor's readers off passthrough (Table.Retired).
// "Rekeyed" is said only of commits; a rename through the mount is
// "renamed".
//
// Such a number outlives the node: once the kernel forgets it (memory
// pressure, drop_caches), the object's next node answers to the same
// number (Table.Forget keeps it, Table.MadeUp gives it back), as a
// native file keeps its number for its life. A program that compares
// st_ino over time sees the same file: git's index records it, and a
// changed number has git read every such file again (a cold git status
// of an untarred tree took 4 times as long). The numbers kept go when a
// commit replaces their object (Succeeded), and past maxNumbers the
// oldest half go.
//
// It is a package of its own because it needs nothing of go-fuse: the
// table is generic over the adapter's node N, which it only keeps and
// hands back, and is told each node's inode number by its caller.
package inodes

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// FileID names one backing file over time (locks.FileID).
type FileID = locks.FileID

// BorrowedBit marks the inode numbers the mount makes up for objects whose
// own number is borrowed by a live node; backing filesystems do not hand
// out numbers that high.
const BorrowedBit = 1 << 63

// maxSucceeded bounds the commits remembered for CatchUp; past it the
// record starts again (a node older than that gets ESTALE, as before).
const maxSucceeded = 4096

// maxNumbers bounds the numbers kept for objects whose nodes the kernel
// has forgotten (190 bytes each with the maps' room: 12 MiB at the
// bound); past it the oldest half go, and their objects get their own
// numbers (or made-up ones) at their next lookup. Numbers kept for files
// removed since stay until then: only a commit that replaces a file is
// told to the table.
const maxNumbers = 1 << 16

// Table is a mount's record of inode numbers across commits. Its zero value
// is empty and ready; N is the adapter's node, compared and kept, never
// looked into.
type Table[N comparable] struct {
	// mu guards the maps: each call is one step against the others.
	mu lockorder.Mutex[lockorder.RekeyedMu]
	// rekeyed maps the backing identity of a file that an atomic write
	// replaced to the node the kernel knows it by, so that the file keeps
	// its node, and its inode number on the mount, across commits (SQLite
	// checks that the file behind its descriptor is still the one at its
	// path); and that of an object of any type whose number the mount made
	// up (MadeUp), so that it keeps that number. Entries go when the node
	// is forgotten or retired.
	rekeyed   map[FileID]N
	rekeyedBy map[N]FileID // each node's one entry in rekeyed
	// borrowed holds the inode numbers those nodes answer to, which the
	// backing filesystem may have given to new objects meanwhile; such a
	// new object gets a number with BorrowedBit set instead.
	borrowed map[uint64]N
	// holds maps the backing files whose node was retired to when their
	// next node's readers may pass through (Retired).
	holds map[locks.Key]int64
	// successors maps a backing file a commit replaced to its replacement
	// (CatchUp).
	successors map[FileID]FileID
	// numbers holds the number of an object whose node the kernel has
	// forgotten, where that number is not the object's own (it was in
	// rekeyed); numberOf is the reverse: those numbers stay borrowed.
	// numbersAge is their order of entry, for the bound.
	numbers    map[FileID]uint64
	numberOf   map[uint64]FileID
	numbersAge []FileID
	synthetic  atomic.Uint64 // the last inode number the mount made up
}

// Rekeyed records that the object id is known to the kernel as node m, and
// that m's inode number ino, no longer its backing object's, is borrowed.
// m's earlier entry goes: lookups lead to a node only for what it stands
// for now (Node).
func (t *Table[N]) Rekeyed(id FileID, m N, ino uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setLocked(id, m)
	t.borrowed[ino] = m
}

// setLocked records that id is known as m (mu held); the caller marks m's
// number borrowed.
func (t *Table[N]) setLocked(id FileID, m N) {
	if t.rekeyed == nil {
		t.rekeyed = make(map[FileID]N)
		t.rekeyedBy = make(map[N]FileID)
	}
	if t.borrowed == nil {
		t.borrowed = make(map[uint64]N)
	}
	t.dropLocked(m)
	t.rekeyed[id] = m
	t.rekeyedBy[m] = id
}

// dropLocked removes m's entry from rekeyed; mu is held.
func (t *Table[N]) dropLocked(m N) {
	if id, ok := t.rekeyedBy[m]; ok {
		if t.rekeyed[id] == m {
			delete(t.rekeyed, id)
		}
		delete(t.rekeyedBy, m)
	}
}

// MadeUp returns the node for the object id when a live node borrows its
// backing inode number ino; ok is false when none does. The node is the
// one made for id before, while the kernel knows it; else mk makes one
// with a number of the mount's own, recorded like a rekeyed file's (mk
// returns the node it got, the zero N if none of the adapter's, and that
// node's number). All of it happens under mu, so that two lookups of one
// name racing (a revalidation of an entry is not serialized by the kernel)
// answer one node: two made-up numbers would have the kernel drop the
// first node's entry.
//
// An object whose forgotten node had a number not its own gets that
// number back (Forget kept it), whether or not its own is borrowed.
func (t *Table[N]) MadeUp(id FileID, ino uint64, mk func(ino uint64) (N, uint64)) (m N, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero N
	kept, hasKept := t.numbers[id]
	if !hasKept && !t.borrowedLocked(ino) {
		return zero, false
	}
	if m := t.rekeyed[id]; m != zero {
		return m, true
	}
	num := kept
	if !hasKept {
		num = BorrowedBit | t.synthetic.Add(1)
	}
	m, got := mk(num)
	if m != zero {
		t.unkeepLocked(id)
		t.setLocked(id, m)
		t.borrowed[got] = m
	}
	return m, true
}

// borrowedLocked reports whether number ino is a live node's or kept for
// a forgotten one's object; mu is held.
func (t *Table[N]) borrowedLocked(ino uint64) bool {
	var zero N
	if t.borrowed[ino] != zero {
		return true
	}
	_, kept := t.numberOf[ino]
	return kept
}

// keepLocked keeps number ino for object id, whose node is forgotten; mu
// is held. Past maxNumbers the oldest half go first.
func (t *Table[N]) keepLocked(id FileID, ino uint64) {
	if t.numbers == nil {
		t.numbers = make(map[FileID]uint64)
		t.numberOf = make(map[uint64]FileID)
	}
	if len(t.numbers) >= maxNumbers {
		t.compactAgeLocked()
		old := t.numbersAge[:len(t.numbersAge)/2]
		for _, o := range old {
			t.unkeepLocked(o)
		}
		t.numbersAge = append(t.numbersAge[:0], t.numbersAge[len(old):]...)
	} else if len(t.numbersAge) >= 2*len(t.numbers)+64 {
		t.compactAgeLocked()
	}
	t.unkeepLocked(id)
	if prev, ok := t.numberOf[ino]; ok {
		t.unkeepLocked(prev)
	}
	t.numbers[id] = ino
	t.numberOf[ino] = id
	t.numbersAge = append(t.numbersAge, id)
}

// compactAgeLocked leaves in numbersAge only the objects numbers holds,
// each once, at its latest place: an object taken back by MadeUp or
// Succeeded, or kept again, left places behind. mu is held.
func (t *Table[N]) compactAgeLocked() {
	seen := make(map[FileID]bool, len(t.numbers))
	kept := t.numbersAge[:0:0]
	for i := len(t.numbersAge) - 1; i >= 0; i-- {
		o := t.numbersAge[i]
		if _, ok := t.numbers[o]; ok && !seen[o] {
			seen[o] = true
			kept = append(kept, o)
		}
	}
	slices.Reverse(kept)
	t.numbersAge = kept
}

// unkeepLocked drops the number kept for id, if any; mu is held. Its place
// in numbersAge stays until compactAgeLocked.
func (t *Table[N]) unkeepLocked(id FileID) {
	if ino, ok := t.numbers[id]; ok {
		delete(t.numbers, id)
		if t.numberOf[ino] == id {
			delete(t.numberOf, ino)
		}
	}
}

// Node returns the node the kernel knows the object id by, when that
// node's inode number is not the object's own: a file a commit rekeyed, or
// an object of any type whose number the mount made up (MadeUp). Without
// it, each lookup of such an object would make it a new node. The caller
// checks that the node still stands for id: it may have moved on to a
// later version.
func (t *Table[N]) Node(id FileID) (N, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero N
	m := t.rekeyed[id]
	return m, m != zero
}

// Succeeded records that a commit of this mount replaced the backing file
// old with new. Files are told apart by generation too: backing
// filesystems hand a freed inode number to the next new file at once.
func (t *Table[N]) Succeeded(old, new FileID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.successors == nil || len(t.successors) >= maxSucceeded {
		t.successors = make(map[FileID]FileID)
	}
	t.successors[old] = new
	t.unkeepLocked(old) // that file is gone; its node, if any, is the new file's
}

// CatchUp reports whether commits of this mount replaced the file was,
// which node n (known by inode number ino) stands for, with now, and if so
// records n as the node of now: a lookup made n for the old file while a
// commit renamed over it, too late for the commit to move n. The caller
// then moves n to now; without it, n's next stat or open would answer
// ESTALE, and the kernel retries an open only once.
func (t *Table[N]) CatchUp(n N, ino uint64, was, now FileID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.successors[was]
	for i := 0; ok && k != now && i < 16; i++ {
		k, ok = t.successors[k]
	}
	if !ok || k != now {
		return false
	}
	// n keeps the inode number the kernel knows; the file it stood for no
	// longer has it, and a new file given it must not share it. Lookups of
	// the file now lead to n, as they do to a node the commit moved, unless
	// they lead to that node already.
	var zero N
	if t.rekeyed[now] == zero {
		t.setLocked(now, n)
	} else {
		t.dropLocked(n)
	}
	if t.borrowed == nil {
		t.borrowed = make(map[uint64]N)
	}
	if ino&BorrowedBit == 0 && t.borrowed[ino] == zero {
		t.borrowed[ino] = n
	}
	return true
}

// Forget drops the entries of node m, known by inode number ino, once the
// kernel has forgotten it. Where m stood for an object whose own number
// ino is not (it was rekeyed or made up, and not retired since), ino is
// kept for that object: its next node answers to it again (MadeUp).
func (t *Table[N]) Forget(m N, ino uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.rekeyedBy[m]; ok && t.rekeyed[id] == m && id.Key.Ino != ino {
		t.keepLocked(id, ino)
	}
	t.dropLocked(m)
	if t.borrowed[ino] == m {
		delete(t.borrowed, ino)
	}
}

// Retired records that node m, known by inode number ino and standing for
// the backing file key, takes no new opens: lookups must not lead to it
// again. Its number becomes borrowed, so the node made for the file next
// gets a number of its own (two kernel inodes with one number would look
// like hard links to cp and tar), and that node's readers hold off
// passthrough for hold (HoldOf).
func (t *Table[N]) Retired(m N, ino uint64, key locks.Key, hold time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.borrowed == nil {
		t.borrowed = make(map[uint64]N)
	}
	t.dropLocked(m)
	t.borrowed[ino] = m
	now := time.Now()
	if t.holds == nil {
		t.holds = make(map[locks.Key]int64)
	}
	for k, until := range t.holds {
		if until < now.UnixNano() {
			delete(t.holds, k)
		}
	}
	t.holds[key] = now.Add(hold).UnixNano()
}

// HoldOf is when (Unix nanoseconds) a new node for the backing file key may
// let readers pass through (see Retired); 0 for most files.
func (t *Table[N]) HoldOf(key locks.Key) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holds[key]
}

// Borrowed reports whether a live node answers to inode number ino without
// its backing object having it, or the number is kept for an object whose
// node the kernel forgot (Forget).
func (t *Table[N]) Borrowed(ino uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.borrowedLocked(ino)
}

// Kept is how many numbers are kept for objects whose nodes the kernel
// has forgotten (Forget).
func (t *Table[N]) Kept() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.numbers)
}

// Entries is how many objects the table leads to a node, and how many
// nodes it leads to: equal, each node having one entry, and 0 once every
// node it knew is forgotten or retired.
func (t *Table[N]) Entries() (objects, nodes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rekeyed), len(t.rekeyedBy)
}

// Number is the mount's inode number of the backing object (dev, ino):
// objects on the root's device rootDev keep their own number; others are
// mixed with their device, so that a filesystem mounted inside the backing
// dir cannot collide.
func Number(rootDev, dev, ino uint64) uint64 {
	if dev == rootDev {
		return ino
	}
	swap := func(d uint64) uint64 { return d<<32 | d>>32 }
	return (swap(dev) ^ swap(rootDev)) ^ ino
}
