// Package locks is realm's write lock table: which owner may write a file
// through the mount. Who a caller's owner is, package procinfo tells.
//
// A lock is keyed by the file's identity (device and inode), not its name, so
// a hard link or a symlink reaches the same lock. One owner may hold a lock
// many times (every write handle of one agent session on one file); the holds
// share one Entry, on which the caller hangs per-file state such as the
// shared temp file. Locks live in memory only: a crash frees them all.
//
// A lock is taken in a Mode: Write is exclusive (one owner), Append is
// shared among appending owners and exclusive against another owner's
// Write. Each owner holding a key has its own Entry.
//
// The model is gocryptfs's internal/openfiletable: one map behind one mutex,
// held only for the map operation, never across I/O.
package locks

import (
	"io"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Key is a file's identity: two names of one file have one Key.
type Key struct {
	Dev, Ino uint64
}

// FileID names one file over time: its Key and its generation (its birth
// time, dirfd.Statx), so that an inode number a deleted file freed and a
// new file took is another identity. The inode table, the write engine
// and the guard key their records by it.
type FileID struct {
	Key Key
	Gen uint64
}

// KeyOf is the Key of the file with stat st.
func KeyOf(st *unix.Stat_t) Key { return Key{Dev: st.Dev, Ino: st.Ino} }

// Owner names who holds a lock, as produced by a Resolver, for example
// "cgroup:/user.slice/session-3.scope". Owners compare as strings.
type Owner string

// Mode is how a lease holds its key.
type Mode int

const (
	// Write is exclusive: no other owner holds the key in any mode.
	Write Mode = iota
	// Append is shared among owners that append: no other owner holds
	// the key for Write.
	Append
)

// Table is the lock table. The zero value is not usable; call NewTable.
// A Table is safe for concurrent use.
type Table struct {
	mu      lockorder.Mutex[lockorder.TableMu]
	entries map[Key][]*Entry // one per owner; more than one only if none writes
	// changed is closed (and replaced) at every change while waiters > 0:
	// what AcquireWait and WaitOthers sleep on (wait.go).
	changed chan struct{}
	waiters int
	// pins keep a key's file alive while entries hold the key (Pin).
	pins map[Key]io.Closer
}

// NewTable returns an empty lock table.
func NewTable() *Table {
	return &Table{entries: make(map[Key][]*Entry), changed: make(chan struct{}), pins: make(map[Key]io.Closer)}
}

// Entry is the state shared by all leases of one owner on one file. It lives
// as long as any of those leases is unreleased.
//
// Value is the caller's: the table never reads or writes it. It is guarded by
// the entry's own lock (Lock, Unlock), not the table's, so work on one file
// (copying into a temp file, fsync) never blocks lock operations on others.
// The table never takes an entry's lock, so its methods may be called with
// the lock held.
type Entry struct {
	mu    lockorder.Mutex[lockorder.Entry]
	Value any // guarded by Lock/Unlock

	owner Owner     // immutable
	file  *FileLock // immutable; shared by every owner's entry of the file
	// fileLock is the file's lock where this entry was the file's first
	// (file points here; the others' too, keeping this entry alive): no
	// allocation of its own on a write open.
	fileLock FileLock
	key      Key // guarded by Table.mu; changes on Rekey
	refs     int // guarded by Table.mu; unreleased leases
	writes   int // guarded by Table.mu; of those, Write leases
	closing  int // guarded by Table.mu; of those, marked Closing
	// opener is the pid of the open that took the entry first (NoteOpener),
	// 0 if unknown: what an audit line of a conflict names besides the
	// owner. Not the entry's only process: an owner's other opens share
	// it, and the first may have exited, its descriptor passed on.
	opener atomic.Uint32
}

// Lock locks the entry's Value.
func (e *Entry) Lock() { e.mu.Lock() }

// Unlock unlocks the entry's Value.
func (e *Entry) Unlock() { e.mu.Unlock() }

// LockOrdered is Lock for a caller that holds several entries at once:
// each is taken in ascending key, the one order of internal/lockorder's
// class locks.Entry.
func (e *Entry) LockOrdered(key uint64) { e.mu.LockOrdered(key) }

// Owner returns the owner that holds the entry.
func (e *Entry) Owner() Owner { return e.owner }

// FileLock orders what several owners do to one file itself while each
// holds it: appenders of different owners share a key (Append), and one
// may commit a rewrite (an ftruncate through its appending handle) by
// renaming a new file over the one the others append to, or by copying
// into it. Shared by an append in place, exclusive by a commit, it keeps
// another owner's append out of the window between a commit's look at
// the file and its rename (and the Rekey after it), where the append
// would land in the file being replaced and be lost with it. One per
// file: every owner's entry of a key has the same one, and Rekey moves
// it with them. Taken under the caller's entry lock (internal/lockorder:
// locks.FileLock).
type FileLock = lockorder.RWMutex[lockorder.FileMu]

// File returns the lock of the file the entry holds, which every owner's
// entry of the file shares.
func (e *Entry) File() *FileLock { return e.file }

// NoteOpener records pid as the entry's opener, unless one is recorded.
func (e *Entry) NoteOpener(pid uint32) { e.opener.CompareAndSwap(0, pid) }

// Opener is the pid NoteOpener recorded on owner's entry of key; 0 if
// owner holds no entry of key or none was recorded.
func (t *Table) Opener(key Key, owner Owner) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries[key] {
		if e.owner == owner {
			return e.opener.Load()
		}
	}
	return 0
}

// Lease is one hold of a lock, returned by Acquire. Release it exactly when
// the hold ends (for example when the file handle is released); releasing it
// again is harmless.
type Lease struct {
	t        *Table
	e        *Entry
	mode     Mode
	released atomic.Bool
	// closing: marked Closing and not Active since. Changed only under
	// Table.mu; atomic so that Active can look without it.
	closing atomic.Bool
}

// Acquire takes the lock on key for owner in Write mode (AcquireMode).
func (t *Table) Acquire(key Key, owner Owner) (*Lease, error) {
	return t.AcquireMode(key, owner, Write)
}

// AcquireMode takes the lock on key for owner in mode. If another owner
// holds the key in a way mode excludes (any hold, for Write; a Write hold,
// for Append) it returns an *errcode.Error with code LOCK_CONFLICT naming
// the holder. If owner already holds the key, the new lease shares its
// Entry; an owner that appends alone may also take Write.
func (t *Table) AcquireMode(key Key, owner Owner, mode Mode) (*Lease, error) {
	l := &Lease{t: t, mode: mode} // allocate outside the critical section
	t.mu.Lock()
	var own *Entry
	for _, e := range t.entries[key] {
		switch {
		case e.owner == owner:
			own = e
		case mode == Write || e.writes > 0:
			t.mu.Unlock()
			return nil, conflict(key, e.owner)
		}
	}
	if own == nil {
		own = &Entry{owner: owner, key: key}
		if es := t.entries[key]; len(es) > 0 {
			own.file = es[0].file
		} else {
			own.file = &own.fileLock
		}
		t.entries[key] = append(t.entries[key], own)
	}
	own.refs++
	if mode == Write {
		own.writes++
	}
	t.changedLocked() // the entry is no longer draining
	t.mu.Unlock()
	l.e = own
	return l, nil
}

// Holder reports who holds key, if anyone: the owner that writes it, or
// one of those that append to it.
func (t *Table) Holder(key Key) (Owner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.entries[key]
	if len(es) == 0 {
		return "", false
	}
	for _, e := range es {
		if e.writes > 0 {
			return e.owner, true
		}
	}
	return es[0].owner, true
}

// OtherHolder reports an owner other than me that holds key, if any.
func (t *Table) OtherHolder(key Key, me Owner) (Owner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries[key] {
		if e.owner != me {
			return e.owner, true
		}
	}
	return "", false
}

// Entry returns the entry that holds key (the writer's, or one
// appender's), so a caller can reach the holder's shared state (an atomic
// write in progress) without holding a lease of its own; it reports false
// if no one holds key.
func (t *Table) Entry(key Key) (*Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.entries[key]
	if len(es) == 0 {
		return nil, false
	}
	for _, e := range es {
		if e.writes > 0 {
			return e, true
		}
	}
	return es[0], true
}

// EntryOf returns owner's entry on key, if owner holds it.
func (t *Table) EntryOf(key Key, owner Owner) (*Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries[key] {
		if e.owner == owner {
			return e, true
		}
	}
	return nil, false
}

// Entries returns every owner's entry on key.
func (t *Table) Entries(key Key) []*Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Entry(nil), t.entries[key]...)
}

// Len returns the number of keys held, for tests and metrics.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Rekey moves the lock held on old to new, leases, Entry and Value included.
// An atomic write renames a temp file over the target, which gives the file a
// new inode while its lock must stay held. The caller must hold a lease on
// old (Lease.Key says where it is now): Rekey moves whichever entry is there.
//
// If another entry holds new, Rekey returns LOCK_CONFLICT and changes
// nothing; that includes the same owner holding new under a separate entry,
// since two entries' Values cannot be merged. Rekey of a key nobody holds,
// or of a key to itself, does nothing: there is no lock to carry.
func (t *Table) Rekey(old, new Key) error {
	if old == new {
		return nil
	}
	t.mu.Lock()
	es, ok := t.entries[old]
	if !ok {
		t.mu.Unlock()
		return nil
	}
	if h, ok := t.entries[new]; ok {
		t.mu.Unlock()
		return conflict(new, h[0].owner)
	}
	delete(t.entries, old)
	for _, e := range es {
		e.key = new
	}
	t.entries[new] = es
	pin := t.unpinLocked(old)
	t.changedLocked() // a waiter on old finds it free now
	t.mu.Unlock()
	if pin != nil {
		pin.Close()
	}
	return nil
}

// Pin ties c, an open descriptor of key's file, to the entries holding
// key: it is closed when the last of them is released or they move to
// another key (Rekey). It reports false, leaving c to the caller, if no
// entry holds key or another pin does.
//
// A key is an inode number, which the filesystem gives to a new file once
// the old one is freed. An owner's entry may be moved to a file it holds
// no descriptor of (another owner's commit renames a new file over the one
// both append to: Rekey moves every owner's entry); if that file is then
// removed and freed, its number, still held in the table, would lock a
// stranger's new file. The pin keeps the file, and so the number, alive.
func (t *Table) Pin(key Key, c io.Closer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries[key]) == 0 || t.pins[key] != nil {
		return false
	}
	t.pins[key] = c
	return true
}

// unpinLocked takes key's pin out of the table, for the caller to close
// outside t.mu; t.mu is held.
func (t *Table) unpinLocked(key Key) io.Closer {
	c := t.pins[key]
	delete(t.pins, key)
	return c
}

// Release ends the lease's hold. The lock is freed when the last lease of its
// Entry is released. Release is idempotent and safe for concurrent calls; a
// nil Lease is a no-op.
func (l *Lease) Release() {
	if l == nil || !l.released.CompareAndSwap(false, true) {
		return
	}
	t, e := l.t, l.e
	var pin io.Closer
	t.mu.Lock()
	e.refs--
	if l.mode == Write {
		e.writes--
	}
	if l.closing.Load() {
		e.closing--
	}
	t.changedLocked()
	if e.refs == 0 {
		es := t.entries[e.key]
		for i, x := range es {
			if x == e {
				es = append(es[:i], es[i+1:]...)
				break
			}
		}
		if len(es) == 0 {
			delete(t.entries, e.key)
			pin = t.unpinLocked(e.key)
		} else {
			t.entries[e.key] = es
		}
	}
	t.mu.Unlock()
	if pin != nil {
		pin.Close()
	}
}

// Shared returns the Entry shared by every lease of this owner on this file:
// the same pointer for all of them, for as long as any is unreleased.
func (l *Lease) Shared() *Entry { return l.e }

// Owner returns the lease's owner.
func (l *Lease) Owner() Owner { return l.e.owner }

// Key returns the key the lease holds now, which Rekey may have changed since
// Acquire.
func (l *Lease) Key() Key {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	return l.e.key
}

// EntryKey returns the key e holds now, which Rekey may have changed: a
// commit of another owner's moves every owner's entry on the file.
func (t *Table) EntryKey(e *Entry) Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.key
}

// conflict is built outside the table's lock: formatting is the slow part.
func conflict(key Key, holder Owner) error {
	return errcode.New(errcode.LockConflict,
		"file (dev %d, ino %d) is locked by owner %q", key.Dev, key.Ino, holder)
}
