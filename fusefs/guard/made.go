package guard

import (
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// MadeSet is the set of files made through the mount at credential paths.
// A credential glob names files the host placed in BACKING; a file a
// process on the mount created holds only what its writers already had, so
// reading it back is no leak: `git clone` of a repository with
// test/fixtures/server.key, `npm install` of a package that ships test
// keys, a generated .env. The set holds the identity of every file made
// through the mount at a credential path (create, mknod, a link or rename
// of a file the mount could read onto such a name), and follows it through
// commits (Carry: the temp that replaces it is made through the mount too)
// and through every other change the mount makes to it (Guard.OwnChange).
// Each entry keeps the file's size, mtime and ctime as the mount last left
// them: a file changed behind the mount (the host wrote it in BACKING) no
// longer matches at its next check, and is host-placed again, a credential
// under every name. The ctime is what the host cannot set back: `cp -p
// secret .env` over a made .env of the same size restores the mtime, never
// the ctime. A file the host replaced is another identity, never in the
// set. The set outlives the mount only in the daemon's own state, outside
// BACKING (Load, Save): nothing in BACKING could be trusted to say a file
// was made, since a process on the mount writes BACKING's files and their
// xattrs.
type MadeSet struct {
	mu  lockorder.Mutex[lockorder.MadeSetMu]
	set map[locks.Key]stamp
}

// stamp is what a made file looked like when the mount last changed it.
type stamp struct {
	gen        uint64
	size       int64
	mtim, ctim unix.Timespec
}

func stampOf(gen uint64, st *unix.Stat_t) stamp {
	return stamp{gen: gen, size: st.Size, mtim: st.Mtim, ctim: st.Ctim}
}

// MadeState is what Check says of a file.
type MadeState int

const (
	NotMade     MadeState = iota // not made through the mount (or its number went to another file)
	MadeFresh                    // made through the mount, unchanged behind it
	MadeChanged                  // was made through the mount; changed behind it since: dropped
)

func (s MadeState) String() string {
	switch s {
	case MadeFresh:
		return "made"
	case MadeChanged:
		return "changed"
	}
	return "not made"
}

// Add records id, whose stat st is, as made through the mount.
func (s *MadeSet) Add(id ID, st *unix.Stat_t) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = make(map[locks.Key]stamp)
	}
	s.set[id.Key] = stampOf(id.Gen, st)
}

// Holds reports whether a file with key may be in the set (whatever its
// generation): a look with no system call, before a change's stat.
func (s *MadeSet) Holds(key locks.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[key]
	return ok
}

// Check says whether id was made through the mount, and, with st (the
// file as just found), whether it is still as the mount left it: its
// size, mtime and ctime; a changed file leaves the set.
func (s *MadeSet) Check(id ID, st *unix.Stat_t) MadeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.set[id.Key]
	switch {
	case !ok:
		return NotMade
	case m.gen != id.Gen:
		delete(s.set, id.Key) // the number went to another file
		return NotMade
	case st != nil && stampOf(id.Gen, st) != m:
		delete(s.set, id.Key)
		return MadeChanged
	}
	return MadeFresh
}

// Restamp records after as the made file id's look after a change the
// mount made to it, if before (its look just before that change) was the
// look the set had: a change behind the mount before it is never taken
// for the mount's own.
func (s *MadeSet) Restamp(id ID, before, after *unix.Stat_t) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.set[id.Key]; ok && m == stampOf(id.Gen, before) {
		s.set[id.Key] = stampOf(id.Gen, after)
	}
}

// Carry carries a made file to the file a commit put in its place (old
// replaced by new, whose stat is st): the mount's own write.
func (s *MadeSet) Carry(old, new ID, st *unix.Stat_t) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.set[old.Key]; ok && m.gen == old.Gen {
		delete(s.set, old.Key)
		s.set[new.Key] = stampOf(new.Gen, st)
	}
}

// Len is the number of files in the set.
func (s *MadeSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}
