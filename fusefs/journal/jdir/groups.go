// A journal keeps its described kept/ entries in groups:
//
//	kept/gN/SEQ~OWNER~OWNER_START~SESSION~PATH	(N = SEQ >> GroupBits)
//
// not in kept/ itself (fusefs/journal, described.go). The rename that
// removes a name looks the new name up in its target directory and adds
// it there: in one kept/ of tens of thousands of entries both are htree
// probes of leaf blocks that are out of the caches between two requests,
// and its leaves split as it grows (perf of the daemon over an rm -rf of
// 20,260 removals: 9 µs a removal in ext4_dx_find_entry and
// ext4_dx_add_entry). A group is made by the first removal of its seqs
// and holds at most 1<<GroupBits entries: the entries a removal looks
// through are those the removals just before it touched.
//
// Groups hold described entries only, which are made only where a rename
// is whole after a crash (a filesystem journaling its metadata) or where
// no durability is promised: a group's mkdir is metadata made before the
// renames into it, which that journal makes durable in that order, so it
// needs no sync of kept/.
package jdir

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// GroupBits: a group holds the described entries of 1<<GroupBits seqs.
const GroupBits = 6

// groupPrefix begins a group's name; a kept/ entry's name begins with its
// seq's digits.
const groupPrefix = "g"

// GroupName is the name in kept/ of the group of seq's described entry.
func GroupName(seq uint64) string { return groupNameOf(seq >> GroupBits) }

// nameOf is group num's name.
func groupNameOf(num uint64) string { return groupPrefix + strconv.FormatUint(num, 10) }

// GroupNum is the number of the group named name, if name is one.
func GroupNum(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, groupPrefix)
	if !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && groupNameOf(n) == name
}

// GroupPath is the path beneath kept/ of name, seq's described entry, in its
// group.
func GroupPath(seq uint64, name string) string { return GroupName(seq) + "/" + name }

// AppendGroupDir appends the path beneath kept/ of seq's group and a
// slash to b: what GroupPath puts before the entry's name.
func AppendGroupDir(b []byte, seq uint64) []byte {
	b = strconv.AppendUint(append(b, groupPrefix...), seq>>GroupBits, 10)
	return append(b, '/')
}

// SplitKept splits a path beneath kept/ into its group's name ("" for an
// entry of kept/ itself) and the entry's. A described name holds no "/"
// (package keptname escapes it).
func SplitKept(rel string) (group, name string) {
	if g, n, ok := strings.Cut(rel, "/"); ok {
		return g, n
	}
	return "", rel
}

// A Group is an open group directory.
type Group struct {
	FD   int // O_PATH
	num  uint64
	refs int // its holders, and one while it is cached
}

// Groups opens kept/'s groups and keeps the two used last open: the newest
// (where removals go) and one other (a prune's, an undo's).
type Groups struct {
	kept  int // kept/, the journal's
	mu    lockorder.Mutex[lockorder.KeptGroupsMu]
	cache [2]*Group // [0] the newest group used, [1] another
	low   uint64    // no group below it is left in kept/
}

// Init sets the Groups' kept/ (kept, O_PATH) and its lowest group (Open's
// listing says it: ListKept).
func (s *Groups) Init(kept int, low uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept, s.low = kept, low
}

// Acquire returns the group of seq, opened, made first with create; the
// caller releases it. An absent group is ENOENT.
func (s *Groups) Acquire(seq uint64, create bool) (*Group, error) {
	num := seq >> GroupBits
	if g := s.cached(num); g != nil {
		return g, nil
	}
	fd, err := s.open(num, create)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.cache { // opened meanwhile by another
		if g != nil && g.num == num {
			g.refs++
			dirfd.Close(fd)
			return g, nil
		}
	}
	g := &Group{FD: fd, num: num, refs: 2}
	s.evictLocked(1)
	if s.cache[0] == nil || num >= s.cache[0].num {
		s.cache[0], s.cache[1] = g, s.cache[0]
	} else {
		s.cache[1] = g
	}
	return g, nil
}

// open opens group num, made first with create, and checks it is the
// daemon's user's.
func (s *Groups) open(num uint64, create bool) (int, error) {
	name := groupNameOf(num)
	if create {
		return Subdir(s.kept, name)
	}
	return OpenDirOwned(s.kept, name, "kept/"+name)
}

// OpenDirOwned opens the directory name of dir, O_PATH, refused where
// the daemon's user does not own it (Owned; what names it).
func OpenDirOwned(dir int, name, what string) (int, error) {
	fd, err := dirfd.OpenDir(dir, name)
	if err != nil {
		return -1, err
	}
	if err := Owned(fd, what); err != nil {
		dirfd.Close(fd)
		return -1, err
	}
	return fd, nil
}

// cached is group num from the cache, held, or nil.
func (s *Groups) cached(num uint64) *Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.cache {
		if g != nil && g.num == num {
			g.refs++
			return g
		}
	}
	return nil
}

// Release lets go of g, closed once no one holds it.
func (s *Groups) Release(g *Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(g)
}

// RemoveThrough removes the groups whose seqs are all at or below seq
// (the pruned mark: their entries were pruned), from the lowest left. One
// still holding an entry (its removal failed) stays, for Open's sweep.
func (s *Groups) RemoveThrough(seq uint64) {
	end := (seq + 1) >> GroupBits // the groups below it are all at or below seq
	s.mu.Lock()
	from := s.low
	s.low = max(from, end)
	for i, g := range s.cache {
		if g != nil && g.num < end {
			s.evictLocked(i)
		}
	}
	s.mu.Unlock()
	for num := from; num < end; num++ {
		// ENOENT: never made (no described removal of its seqs).
		_ = dirfd.Unlink(s.kept, groupNameOf(num), unix.AT_REMOVEDIR)
	}
}

// Close closes the cached groups; no holder is left.
func (s *Groups) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictLocked(0)
	s.evictLocked(1)
}

// evictLocked drops the cache's hold of slot i. Under mu.
func (s *Groups) evictLocked(i int) {
	if g := s.cache[i]; g != nil {
		s.cache[i] = nil
		s.dropLocked(g)
	}
}

// dropLocked drops one hold of g. Under mu.
func (s *Groups) dropLocked(g *Group) {
	if g.refs--; g.refs == 0 {
		dirfd.Close(g.FD)
	}
}

// A KeptEnt is an entry of kept/ or of one of its groups, as ListKept
// lists them.
type KeptEnt struct {
	Dir  int    // kept/, or its group's (ListKept's)
	Name string // the entry's name there
	Rel  string // its path beneath kept/
}

// ListKept lists kept (kept/) and its groups, and says the lowest group's
// number (MaxUint64: none). An entry of a group that is not of its seqs
// (by seqOf, which reads a kept/ entry's seq from its name) is left out:
// the journal neither made nor reads it. done closes the groups'
// descriptors.
func ListKept(kept int, seqOf func(string) (uint64, bool)) (ents []KeptEnt, low uint64, done func(), err error) {
	top, err := dirfd.ReadDir(kept)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("journal: listing kept/: %w", err)
	}
	var fds []int
	done = func() {
		for _, fd := range fds {
			dirfd.Close(fd)
		}
	}
	low = math.MaxUint64
	for _, de := range top {
		num, ok := GroupNum(de.Name)
		if !ok {
			ents = append(ents, KeptEnt{Dir: kept, Name: de.Name, Rel: de.Name})
			continue
		}
		low = min(low, num)
		fd, err := OpenDirOwned(kept, de.Name, "kept/"+de.Name)
		var names []dirfd.Dirent
		if err == nil {
			fds = append(fds, fd)
			names, err = dirfd.ReadDir(fd)
		}
		if err != nil {
			done()
			return nil, 0, nil, fmt.Errorf("journal: listing kept/%s: %w", de.Name, err)
		}
		for _, e := range names {
			if seq, ok := seqOf(e.Name); ok && seq>>GroupBits == num {
				ents = append(ents, KeptEnt{Dir: fd, Name: e.Name, Rel: de.Name + "/" + e.Name})
			}
		}
	}
	return ents, low, done, nil
}

// RemoveKept removes the kept object name of dir (kept/ or a group): a
// file, a symlink, a node or an empty directory. ENOENT is no error.
func RemoveKept(dir int, name string) error {
	err := dirfd.Unlink(dir, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = dirfd.Unlink(dir, name, unix.AT_REMOVEDIR)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// OpenKept opens rel, a path beneath kept (kept/) as Described gives it,
// O_PATH, each step with no symlink followed.
func OpenKept(kept int, rel string) (int, error) {
	group, name := SplitKept(rel)
	if group == "" {
		return dirfd.OpenPath(kept, name)
	}
	gfd, err := dirfd.OpenDir(kept, group)
	if err != nil {
		return -1, err
	}
	defer dirfd.Close(gfd)
	return dirfd.OpenPath(gfd, name)
}
