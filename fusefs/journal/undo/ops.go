package undo

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// The inverse of each change. Each checks first that the object the
// change left is still at its name (want: by identity), and answers why
// not as the path's conflict; an error of the journal's is errJournal.

// unmake removes the object a create, mkdir, symlink, mknod or link made
// at path (id: the object made; remove: unlink or rmdir), kept in the
// journal as any removal is.
func (u *undoer) unmake(r *journal.Record, path string, id *journal.ID, remove journal.Op) (string, error) {
	dir, name, obj, err := u.at(path)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(dir)
	if id != nil {
		err = u.holds(path, obj, *id)
	} else if obj == nil {
		err = fmt.Errorf("%s is gone: removed since, from outside the mount", path)
	}
	if err != nil {
		return "", err
	}
	if _, err := u.s.Remove(u.record(remove, path, obj), dir, name); err != nil {
		if errors.Is(err, unix.ENOTEMPTY) {
			return "", fmt.Errorf("%s holds names made since by others or from outside: left in place", path)
		}
		return "", journaled(err)
	}
	return "removed", nil
}

// unremove puts back what an unlink or an rmdir removed: the object
// itself, out of the journal's kept/.
func (u *undoer) unremove(r *journal.Record) (string, error) {
	if !r.Kept || r.Before == nil {
		return "", errors.New("what it removed was not kept")
	}
	dir, name, obj, err := u.at(r.Path)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(dir)
	if obj != nil {
		return "", fmt.Errorf("%s exists again: made since, from outside the mount", r.Path)
	}
	if _, err := u.s.Restore(u.record(journal.MakeOp(r.Before.Type), r.Path, nil), r.Seq, journal.NoKeep, dir, name); err != nil {
		return "", journaled(err)
	}
	return "restored", nil
}

// current opens the object at name in dir as an O_PATH fd, checked to be
// obj (the caller's to close).
func current(dir int, name string, obj *journal.Object) (int, error) {
	return openChecked(dir, name, obj, unix.O_PATH)
}

// openChecked opens the object at name in dir (O_PATH, or a file with
// flags), checked through the fd to be obj: what undo changes is what it
// checked, whatever a host process renamed over the name between its
// check and the open (a hard link in BACKING to a file outside it, say).
func openChecked(dir int, name string, obj *journal.Object, flags int) (int, error) {
	var fd int
	var err error
	if flags == unix.O_PATH {
		fd, err = dirfd.OpenPath(dir, name)
	} else {
		fd, err = dirfd.Open(dir, name, flags, 0)
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil || (journal.ID{Dev: st.Dev, Ino: st.Ino}) != obj.ID() {
		dirfd.Close(fd)
		return -1, errors.Join(err, errors.New("changed while undone"))
	}
	return fd, nil
}

// unrewrite puts back the version a commit replaced (a rewrite, or a
// truncate made by one): the kept file renamed over the one the change
// left, which the journal keeps in turn. A version that was empty and not
// kept (a new file's first commit) comes back as a new empty file with
// its metadata. A truncate made in place is cut back, as an append is.
func (u *undoer) unrewrite(r *journal.Record) (string, error) {
	if r.Op == journal.OpTruncate && !r.Kept {
		return u.unappend(r)
	}
	dir, name, obj, err := u.at(r.Path)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(dir)
	if r.After != nil {
		err = u.holds(r.Path, obj, *r.After)
	} else if obj == nil {
		err = fmt.Errorf("%s is gone: removed since, from outside the mount", r.Path)
	}
	if err != nil {
		return "", err
	}
	keep, err := current(dir, name, obj)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(keep)
	switch {
	case r.Kept:
		if _, err := u.s.Restore(u.record(journal.OpRewrite, r.Path, obj), r.Seq, keep, dir, name); err != nil {
			return "", journaled(err)
		}
		return "restored the version it replaced", nil
	case r.Before != nil && r.Before.Size == 0:
		return u.emptyFile(r, dir, name, obj, keep)
	}
	return "", errors.New("the version it replaced was not kept (a commit in place, of a file with several links)")
}

// emptyFile replaces the file at name with a new empty one with r.Before's
// owner, mode and times: an empty version the journal did not keep.
func (u *undoer) emptyFile(r *journal.Record, dir int, name string, obj *journal.Object, keep int) (string, error) {
	b := r.Before
	tmp := TempPrefix + "undo-" + strconv.FormatUint(r.Seq, 10)
	fd, err := dirfd.Open(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	var st unix.Stat_t
	err = errors.Join(dirfd.Chown(fd, int(b.Uid), int(b.Gid)), dirfd.Chmod(fd, b.Mode&0o7777),
		dirfd.Utimens(fd, timespecs(b)))
	var gen uint64
	if err == nil {
		gen, err = dirfd.Statx(fd, "", &st)
	}
	dirfd.Close(fd)
	if err != nil {
		dirfd.Unlink(dir, tmp, 0)
		return "", err
	}
	rec := u.record(journal.OpRewrite, r.Path, obj)
	made := journal.ID{Dev: st.Dev, Ino: st.Ino}
	rec.After = &made
	c, err := u.s.Begin(rec, keep)
	if err != nil {
		dirfd.Unlink(dir, tmp, 0)
		return "", journaled(err)
	}
	if err := dirfd.Rename(dir, tmp, dir, name, 0); err != nil {
		dirfd.Unlink(dir, tmp, 0)
		return "", errors.Join(err, journaled(c.Abort()))
	}
	u.standIn[b.ID()] = standIn{made, gen}
	return "restored it empty", journaled(c.Done(nil))
}

// TempPrefix starts the name undo stages a new empty file under: the write
// engine's (writeengine.TempPrefix), which the mount hides and its
// mount-time sweep removes after a crash.
const TempPrefix = ".realm-tmp-"

// unappend cuts the file back to its size before the appends (or a
// truncate made in place), and its times to theirs. The bytes cut are not
// kept.
func (u *undoer) unappend(r *journal.Record) (string, error) {
	dir, name, obj, err := u.atBefore(r, "size")
	if err != nil {
		return "", err
	}
	defer dirfd.Close(dir)
	if obj.Size < r.Before.Size {
		return "", fmt.Errorf("%s is shorter (%d bytes) than before the change (%d): cut since, the bytes not kept", r.Path, obj.Size, r.Before.Size)
	}
	fd, err := openChecked(dir, name, obj, unix.O_WRONLY)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(fd)
	c, err := u.s.Begin(u.record(journal.OpTruncate, r.Path, obj), journal.NoKeep)
	if err != nil {
		return "", journaled(err)
	}
	if err := errors.Join(unix.Ftruncate(fd, r.Before.Size), dirfd.Utimens(fd, timespecs(r.Before))); err != nil {
		return "", errors.Join(err, journaled(c.Done(nil)))
	}
	return "cut back to " + strconv.FormatInt(r.Before.Size, 10) + " bytes", journaled(c.Done(nil))
}

// atBefore is u.at of the path of r, a change made in place, checked to
// hold r.Before's object (what: what undoing needs of it, for the error
// where the record has none); the caller closes dir.
func (u *undoer) atBefore(r *journal.Record, what string) (dir int, name string, obj *journal.Object, err error) {
	if r.Before == nil {
		return -1, "", nil, fmt.Errorf("its %s before is not known", what)
	}
	if dir, name, obj, err = u.at(r.Path); err != nil {
		return -1, "", nil, err
	}
	err = u.holds(r.Path, obj, r.Before.ID())
	if gen := u.wantGen(r.Before); err == nil && gen != 0 && obj.Gen != gen {
		// The number the record names, but another object: the one
		// changed was removed since, and a new one got its number.
		err = fmt.Errorf("%s is another object than the change left there (made since under the same inode number): changed from outside the mount", r.Path)
	}
	if err != nil {
		dirfd.Close(dir)
		return -1, "", nil, err
	}
	return dir, name, obj, nil
}

// unsetattr puts back the owner, mode and times the object had before a
// chmod, chown or utimens.
func (u *undoer) unsetattr(r *journal.Record) (string, error) {
	dir, name, obj, err := u.atBefore(r, "metadata")
	if err != nil {
		return "", err
	}
	defer dirfd.Close(dir)
	if err := u.unchangedSince(r, obj); err != nil {
		return "", err
	}
	fd, err := current(dir, name, obj)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(fd)
	c, err := u.s.Begin(u.record(r.Op, r.Path, obj), journal.NoKeep)
	if err != nil {
		return "", journaled(err)
	}
	b := r.Before
	var errs []error
	if obj.Uid != b.Uid || obj.Gid != b.Gid {
		errs = append(errs, dirfd.Chown(fd, int(b.Uid), int(b.Gid)))
	}
	if b.Type != "symlink" {
		// After the chown, which clears set-ID bits: the mode as it was.
		errs = append(errs, dirfd.Chmod(fd, b.Mode&0o7777))
	}
	errs = append(errs, dirfd.Utimens(fd, timespecs(b)))
	if err := errors.Join(errs...); err != nil {
		return "", errors.Join(err, journaled(c.Done(nil)))
	}
	return "metadata restored", journaled(c.Done(nil))
}
