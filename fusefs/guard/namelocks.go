package guard

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// The lock table in names' operations: a rename over, or an unlink of, a
// file another owner is writing is refused, and a write in progress
// follows its file when the mount renames it, as natively the writer's
// bytes land under the file's new name. What is here looks names up in
// the table; fusefs waits (locks.Table.WaitOthers), audits a refusal and
// has the write engine follow.

// FileLock is what the lock table says of the regular file a name leads
// to: its key, and who holds it if anyone does (Held).
type FileLock struct {
	Key    locks.Key
	Holder locks.Owner
	Held   bool
}

// Regular reports whether l's name led to a regular file.
func (l FileLock) Regular() bool { return l.Key != (locks.Key{}) }

// Place is a name in the directory held by Dir.
type Place struct {
	Dir  int
	Name string
}

// NameLocks looks names up in one mount's lock table. CommitMu is the
// mount's (fusefs: FS.commitMu), taken as the mount's lock order says:
// a commit moves a file's lock with its rename under it, so a look and a
// lookup under it never see a file being committed unlocked.
type NameLocks struct {
	Table    *locks.Table
	CommitMu *lockorder.RWMutex[lockorder.CommitMu]
}

// LockOf looks up the regular file name in dir (one fstatat) in the lock
// table; a name that leads to no regular file is not held. The look and
// the lookup are one step under CommitMu (read), as an open's are.
func (n NameLocks) LockOf(dir int, name string) FileLock {
	var st unix.Stat_t
	l, _ := n.LockOfStat(dir, name, &st)
	return l
}

// LockOfStat is LockOf that leaves the name's stat in st, ok where it was
// read (of any type): a removal's record takes it as what it removes.
func (n NameLocks) LockOfStat(dir int, name string, st *unix.Stat_t) (l FileLock, ok bool) {
	n.CommitMu.RLock()
	defer n.CommitMu.RUnlock()
	if dirfd.Lstat(dir, name, st) != nil {
		return FileLock{}, false
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return FileLock{}, true
	}
	return n.held(st), true
}

// LockOfFd is LockOf of the object held by fd (a node's verified fd), not
// under CommitMu: a change of its metadata asks who writes it.
func (n NameLocks) LockOfFd(fd int) FileLock {
	var st unix.Stat_t
	if dirfd.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return FileLock{}
	}
	return n.held(&st)
}

// held is the lock of the regular file whose stat st is.
func (n NameLocks) held(st *unix.Stat_t) FileLock {
	l := FileLock{Key: locks.KeyOf(st)}
	l.Holder, l.Held = n.Table.Holder(l.Key)
	return l
}

// BeginMove marks the regular files the places lead to as moving (begin:
// fusefs's write engine, writeengine.Engine.BeginMoves, which says why),
// and returns their locks as the marks found them and the end of the
// marks, which the caller calls once every write of them has followed the
// rename. A place that leads to no regular file marks nothing. A commit
// that replaced a file between the look and the mark is met by a look
// again: the file the name leads to now is marked instead. seen, if the
// caller has it (one lock per place, else nil), is its own look at the
// places: the first marks are taken from it, not from a look of their
// own, and the look after them meets a file changed since seen as it meets
// a commit (a rename looks at its names before it waits for another
// owner's write: two lstats fewer). Then only the keys of ls are as the
// marks found them.
func (n NameLocks) BeginMove(begin func(keys []locks.Key) (end func()), seen []FileLock, places ...Place) (ls []FileLock, end func()) {
	for {
		if len(seen) == len(places) {
			ls, seen = seen, nil
		} else {
			ls = make([]FileLock, len(places))
			for i, p := range places {
				ls[i] = n.LockOf(p.Dir, p.Name)
			}
		}
		var keys []locks.Key // of regular files
		for _, l := range ls {
			if l.Regular() {
				keys = append(keys, l.Key)
			}
		}
		end = begin(keys)
		same := true
		for i, p := range places {
			same = same && n.LockOf(p.Dir, p.Name).Key == ls[i].Key
		}
		if same {
			return ls, end
		}
		end()
	}
}

// ReplacesOthers reports whether a rename of r would replace a regular
// file an owner other than me writes, and that file's lock (its key and
// that owner): the one at the new name, and for an exchange the one at
// the old name too. The caller holds CommitMu, the
// last look and the rename being one step against a write open's look and
// lock.
func (n NameLocks) ReplacesOthers(r RenameNames, me locks.Owner) (FileLock, bool) {
	places := []Place{{r.NewDir, r.NewName}}
	if r.Exchange {
		places = append(places, Place{r.OldDir, r.Name})
	}
	for _, p := range places {
		var st unix.Stat_t
		if dirfd.Lstat(p.Dir, p.Name, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			key := locks.KeyOf(&st)
			if holder, other := n.Table.OtherHolder(key, me); other {
				return FileLock{Key: key, Holder: holder, Held: true}, true
			}
		}
	}
	return FileLock{}, false
}
