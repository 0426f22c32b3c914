package journal

// kept/: what Remove moves there (an unlink's file, an rmdir's directory),
// what Restore moves back out, and the links kept/ holds to objects that
// may still have names (KeptLinks).

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal/jdir"
	"github.com/realm-dev/realm/fusefs/journal/keptlinks"
	"github.com/realm-dev/realm/fusefs/journal/keptname"
)

// ErrChanged: the name Remove was to remove led to another object than
// the record's Before by the time it was moved (a change from outside,
// or one through the mount since the caller's look), which is back.
var ErrChanged = errors.New("journal: the object changed under the journal")

// Remove removes a name as an unlink (rec.Op OpUnlink) or an rmdir of an
// empty directory (OpRmdir) does, journaled: it holds rec's intent
// (Before, if nil, is the name's stat now; Kept is set) and renames the
// name into kept/ under a name that says what the change removed
// (described.go), which makes that rename the removal and its record at
// once; or, where the filesystem or the fields' length do not allow
// that, it appends the intent, makes it durable with Options.Durable, and
// renames the name into kept/<seq>. Then it appends the end. It returns
// the change's seq.
//
// The errors an unlink or an rmdir answers come back as errnos: ENOENT and
// the rename's own, EISDIR (unlink of a directory), ENOTDIR (rmdir of
// another object), ENOTEMPTY; those found before the intent is appended
// leave no record. What the rename moved is checked again (a change from
// outside in between): an object other than Before is ErrChanged, a
// directory with entries ENOTEMPTY; it is put back and the change
// aborted. If the name was taken meanwhile, it stays in kept/ and the
// change is done: an object other than Before, of the type the op
// removes, was removed as unlinkat would have, and the end names it.
func (j *Journal) Remove(rec Record, dir int, name string) (uint64, error) {
	if rec.Op != OpUnlink && rec.Op != OpRmdir {
		return 0, fmt.Errorf("journal: Remove of op %q", rec.Op)
	}
	dfd := -1
	if rec.Op == OpRmdir {
		var err error
		if dfd, err = openEmpty(dir, name, &rec); err != nil { // the usual ENOTEMPTY: no record
			return 0, err
		}
		defer dirfd.Close(dfd)
	}
	if rec.Before == nil {
		var st unix.Stat_t
		if err := dirfd.Lstat(dir, name, &st); err != nil {
			return 0, err
		}
		rec.Before = ObjectOf(&st)
	}
	if err := removable(rec.Op, rec.Before.Type == "dir"); err != nil {
		return 0, err
	}
	rec.Kept = true
	kdir, entry, done, err := j.removeIntent(&rec)
	if err != nil {
		return 0, err
	}
	defer done()
	seq := rec.Seq
	if testHookBeforeMove != nil {
		testHookBeforeMove()
	}
	if err := moveNoReplace(dir, name, kdir, entry); err != nil {
		j.described.Delete(seq)
		return seq, errors.Join(err, j.appendEnd(seq, Aborted, nil))
	}
	var moved unix.Stat_t
	if verr := j.verifyRemoved(kdir, entry, &rec, dfd, &moved); verr != nil {
		return seq, j.unmove(verr, kdir, entry, &rec, &moved, dir, name)
	}
	return seq, j.removed(&rec, &moved, false)
}

// removed ends the removal rec, done, whose object (stat moved) is in
// kept/ now; renamed says it is not rec's Before, and the end names it.
func (j *Journal) removed(rec *Record, moved *unix.Stat_t, renamed bool) error {
	id := ID{moved.Dev, moved.Ino}
	var link *ID
	if moved.Mode&unix.S_IFMT != unix.S_IFDIR {
		link = &id
	}
	j.countKept(rec.Seq, keptWeight(moved), 1, link)
	_, err := j.appendLine(func() line {
		j.freshGone(id)
		l := line{Seq: rec.Seq, End: Done}
		if renamed {
			l.Before = ObjectOf(moved)
		}
		return l
	})
	return err
}

// unmove puts back what Remove moved into kept/ (entry, whose stat is
// moved) where verify found it is not what rec removes (verr), and ends
// the change aborted. Where the name was taken meanwhile (a change from
// outside) it stays in kept/: only another object than Before, of the
// type rec removes (ErrChanged), was removed as unlinkat would have
// removed what the name held, and the end names it; else the change is
// done with an error (no errno, no ErrChanged: no caller looks again).
func (j *Journal) unmove(verr error, kdir int, entry string, rec *Record, moved *unix.Stat_t, dir int, name string) error {
	if testHookAfterMove != nil {
		testHookAfterMove()
	}
	err := moveNoReplace(kdir, entry, dir, name)
	if err == nil {
		j.described.Delete(rec.Seq)
		return errors.Join(verr, j.appendEnd(rec.Seq, Aborted, nil))
	}
	if errors.Is(verr, ErrChanged) {
		return j.removed(rec, moved, true)
	}
	verr = fmt.Errorf("journal: %v, and it stays in kept/ as change %d's: its name was taken meanwhile (%v)", verr, rec.Seq, err)
	return errors.Join(verr, j.removed(rec, moved, false))
}

// removeIntent records the intent of the removal rec and returns where in
// kept/ the object goes (the directory, its name there, and done to
// release the directory): a described entry in its group, the intent
// held (described.go, package jdir), where the filesystem and the fields
// allow; else kept/<seq>, the intent appended and made durable
// (Options.Durable) before the rename.
func (j *Journal) removeIntent(rec *Record) (kdir int, entry string, done func(), err error) {
	if f := describedFields(rec); j.describes && keptname.Fits(f, j.nameMax) {
		if _, _, err := j.appendIntent(rec, true); err != nil {
			return -1, "", nil, err
		}
		g, err := j.groups.Acquire(rec.Seq, true)
		if err != nil {
			return -1, "", nil, errors.Join(err, j.appendEnd(rec.Seq, Aborted, nil))
		}
		// The entry's path in its group and its name, in one string.
		var buf [256]byte
		dir := jdir.AppendGroupDir(buf[:0], rec.Seq)
		path := string(keptname.AppendName(dir, rec.Seq, f))
		j.described.Store(rec.Seq, path)
		return g.FD, path[len(dir):], func() { j.groups.Release(g) }, nil
	}
	pos, lazy, err := j.appendIntent(rec, false)
	if err != nil {
		return -1, "", nil, err
	}
	if j.opts.Durable && !lazy {
		if err := j.settle(rec.Op, pos, 0); err != nil {
			return -1, "", nil, errors.Join(err, j.appendEnd(rec.Seq, Aborted, nil))
		}
	}
	return j.kept, keptEntry(rec.Seq), func() {}, nil
}

// testHookBeforeMove and testHookAfterMove, set by a test, run between
// Remove's checks and its rename, and between a rename that moved
// another object and its putting back: where a change from outside
// would come.
var testHookBeforeMove, testHookAfterMove func()

// moveNoReplace renames a name to another that must not exist
// (RENAME_NOREPLACE; where the filesystem has no renameat2 flags, EINVAL,
// a rename over nothing, checked first).
func moveNoReplace(fromDir int, from string, toDir int, to string) error {
	err := dirfd.Rename(fromDir, from, toDir, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	var st unix.Stat_t
	if err := dirfd.Lstat(toDir, to, &st); err == nil {
		return unix.EEXIST
	}
	return dirfd.Rename(fromDir, from, toDir, to, 0)
}

// removable is the errno op answers for an object that is (isDir) or is
// not a directory, nil where it removes it.
func removable(op Op, isDir bool) error {
	switch {
	case op == OpUnlink && isDir:
		return unix.EISDIR
	case op == OpRmdir && !isDir:
		return unix.ENOTDIR
	}
	return nil
}

// verifyRemoved checks what Remove moved into kept/ (entry, in kdir), whose
// stat it leaves in st: rec's Before, of the type its op removes, and a
// directory (which dfd, open for reading, is then) empty.
func (j *Journal) verifyRemoved(kdir int, entry string, rec *Record, dfd int, st *unix.Stat_t) error {
	if err := dirfd.Lstat(kdir, entry, st); err != nil {
		return err
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if err := removable(rec.Op, isDir); err != nil {
		return err
	}
	if (ID{st.Dev, st.Ino}) != rec.Before.ID() {
		return ErrChanged
	}
	if !isDir {
		return nil
	}
	return dirfd.CheckEmpty(dfd)
}

// openEmpty is dirfd.OpenEmptyDir of the directory an rmdir (rec)
// removes, which verifyRemoved reads again once it is in kept/. Before,
// if nil, becomes what it opened; if another object, it is ErrChanged.
func openEmpty(dir int, name string, rec *Record) (int, error) {
	var st unix.Stat_t
	fd, err := dirfd.OpenEmptyDir(dir, name, &st)
	switch {
	case err != nil:
		return -1, err
	case rec.Before == nil:
		rec.Before = ObjectOf(&st)
	case rec.Before.ID() != (ID{st.Dev, st.Ino}):
		dirfd.Close(fd)
		return -1, ErrChanged
	}
	return fd, nil
}

// Restore puts the version change seq kept back at name in the directory
// dir, journaled as rec (an undo's change; After is set here: the kept
// object's identity): it appends rec's intent, then renames kept/<seq> to
// the name, and ends the change. With keep (an O_PATH fd of what name
// holds now, as Begin takes it) the rename replaces that object, kept
// first by link as kept/<rec's seq>, in one atomic step: a crash leaves
// either version at the name, each kept or in place. Without it
// (NoKeep) the name must be free (RENAME_NOREPLACE).
//
// The object leaves kept/ rather than being linked out of it, so that it
// comes back with the link count it had: the engine commits a file with
// several links in place. The record of change seq then says kept while
// kept/<seq> is gone; a reader finds the object at the name it came back
// to, by identity.
func (j *Journal) Restore(rec Record, seq uint64, keep int, dir int, name string) (uint64, error) {
	kdir, entry, done, err := j.keptAt(seq)
	if err != nil {
		return 0, fmt.Errorf("journal: the version change %d kept: %w", seq, err)
	}
	defer done()
	var st unix.Stat_t
	if err := dirfd.Lstat(kdir, entry, &st); err != nil {
		return 0, fmt.Errorf("journal: the version change %d kept: %w", seq, err)
	}
	id := ID{st.Dev, st.Ino}
	rec.After = &id
	c, err := j.Begin(rec, keep)
	if err != nil {
		return 0, err
	}
	if keep != NoKeep {
		err = dirfd.Rename(kdir, entry, dir, name, 0)
	} else {
		err = moveNoReplace(kdir, entry, dir, name)
	}
	if err != nil {
		return c.seq, errors.Join(err, c.Abort())
	}
	j.forgetKept(seq)
	j.countKept(seq, -keptWeight(&st), -1, nil) // out of kept/
	return c.seq, c.Done(nil)
}

// The links kept/ holds to objects that may still have names: a file a
// rewrite or a rename replaced while another name, or an open descriptor,
// still holds it; a file unlinked (renamed into kept/) while open or while
// it has other names. Each is one more in the object's st_nlink than the
// workspace has names for it, which the mount takes away (KeptLinks):
// through the mount an unlinked open file's fstat says 0, a hard link's
// other name the links the workspace has.
//
// Journal.keptLinks maps an identity to the seqs of its kept/ entries
// (package keptlinks; keptByseq the other way, under mu): a getattr of an
// object the journal keeps nothing of costs one shard's read lock and a
// map lookup, a removal's note no allocation. Directories are not counted
// (an rmdir's kept directory is no name of a directory in the workspace).

// noteKeptLocked notes kept/<seq>, a link to the object id. Under mu.
func (j *Journal) noteKeptLocked(id ID, seq uint64) {
	j.keptByseq.Store(seq, id)
	j.keptLinks.Add(keptlinks.Key(id), seq)
}

// forgetKept notes that kept/<seq> is gone.
func (j *Journal) forgetKept(seq uint64) {
	j.described.Delete(seq)
	j.mu.Lock()
	defer j.mu.Unlock()
	if id, ok := j.keptByseq.Load(seq); ok {
		j.keptByseq.Delete(seq)
		j.keptLinks.Remove(keptlinks.Key(id), seq)
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

// KeptLinks is how many of the links of the object (dev, ino) are kept/'s,
// not a name in the workspace: what the mount takes from its st_nlink.
// Each is checked to be a link to that object still (an undo, or a prune,
// may have moved it meanwhile); only objects the journal keeps a link to
// cost more than a map lookup.
func (j *Journal) KeptLinks(dev, ino uint64) uint32 {
	id := ID{dev, ino}
	return uint32(j.keptLinks.Each(keptlinks.Key(id), func(seq uint64) bool {
		kdir, entry, done, err := j.keptAt(seq)
		if err != nil {
			return false
		}
		defer done()
		got, ok := keptID(kdir, entry)
		return ok && got == id
	}))
}

// keptName is the path beneath kept/ of change seq's kept version: the
// described one where Remove or Open noted one (in its group, or, made
// before groups, in kept/: package jdir), else SEQ (keptAt opens
// its directory).
func (j *Journal) keptName(seq uint64) string {
	if name, ok := j.described.Load(seq); ok {
		return name
	}
	return keptEntry(seq)
}

// keptAt is where change seq's kept version is: its directory (kept/, or
// a group of it: package jdir) and its name there. done releases
// the directory once its fd is no longer used. A group gone is ENOENT.
func (j *Journal) keptAt(seq uint64) (dir int, name string, done func(), err error) {
	group, name := jdir.SplitKept(j.keptName(seq))
	if group == "" {
		return j.kept, name, func() {}, nil
	}
	g, err := j.groups.Acquire(seq, false)
	if err != nil {
		return -1, "", nil, err
	}
	return g.FD, name, func() { j.groups.Release(g) }, nil
}

// lstatKept stats change seq's kept version.
func (j *Journal) lstatKept(seq uint64, st *unix.Stat_t) error {
	kdir, entry, done, err := j.keptAt(seq)
	if err != nil {
		return err
	}
	defer done()
	return dirfd.Lstat(kdir, entry, st)
}

// removeKeptOf removes change seq's kept version (jdir.RemoveKept): gone
// already, or its group gone, is no error.
func (j *Journal) removeKeptOf(seq uint64) error {
	kdir, entry, done, err := j.keptAt(seq)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	return jdir.RemoveKept(kdir, entry)
}

// listKept lists kept/ and its groups for Open's recovery (jdir.ListKept)
// and tells the groups the lowest left. done closes their descriptors.
func (j *Journal) listKept() (ents []jdir.KeptEnt, done func(), err error) {
	ents, low, done, err := jdir.ListKept(j.kept, keptname.Seq)
	if err != nil {
		return nil, nil, err
	}
	j.groups.Init(j.kept, min(low, (j.pruned.Load()+1)>>jdir.GroupBits))
	return ents, done, nil
}
