package undo

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// unrename moves the object a rename moved back to its old name (a
// directory with everything beneath it), then puts back what the rename
// replaced: the kept file out of kept/, or an empty directory made anew
// with its metadata. An exchange is exchanged back.
func (u *undoer) unrename(r *journal.Record) (string, error) {
	if r.Before == nil {
		return "", errors.New("what it moved is not known")
	}
	tdir, tname, tobj, err := u.at(r.To)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(tdir)
	pdir, pname, pobj, err := u.at(r.Path)
	if err != nil {
		return "", err
	}
	defer dirfd.Close(pdir)
	if err := u.holds(r.To, tobj, r.Before.ID()); err != nil {
		return "", err
	}
	if r.Replaced != nil && !r.Kept && pobj != nil && pobj.ID() == u.want(r.Replaced.ID()) {
		return u.exchange(r, tdir, tname, tobj, pdir, pname, pobj)
	}
	if pobj != nil {
		return "", fmt.Errorf("%s exists again: made since, from outside the mount", r.Path)
	}
	rec := u.record(journal.OpRename, r.To, tobj)
	rec.To = r.Path
	c, err := u.s.Begin(rec, journal.NoKeep)
	if err != nil {
		return "", journaled(err)
	}
	if err := dirfd.Rename(tdir, tname, pdir, pname, unix.RENAME_NOREPLACE); err != nil {
		return "", errors.Join(err, journaled(c.Abort()))
	}
	if err := movedBack(pdir, pname, tobj); err != nil {
		// A host process swapped another object in after the check: it
		// goes back where it was, and the rename counts as not made.
		if rerr := dirfd.Rename(pdir, pname, tdir, tname, unix.RENAME_NOREPLACE); rerr != nil {
			return "", errors.Join(err, rerr, journaled(c.Done(nil)))
		}
		return "", errors.Join(err, journaled(c.Abort()))
	}
	if err := c.Done(nil); err != nil {
		return "", journaled(err)
	}
	if r.Replaced == nil {
		return "moved back", nil
	}
	return u.unreplace(r, tdir, tname)
}

// exchange undoes a RENAME_EXCHANGE by another.
func (u *undoer) exchange(r *journal.Record, tdir int, tname string, tobj *journal.Object, pdir int, pname string, pobj *journal.Object) (string, error) {
	rec := u.record(journal.OpRename, r.To, tobj)
	rec.To, rec.Replaced = r.Path, pobj
	c, err := u.s.Begin(rec, journal.NoKeep)
	if err != nil {
		return "", journaled(err)
	}
	if err := dirfd.Rename(tdir, tname, pdir, pname, unix.RENAME_EXCHANGE); err != nil {
		return "", errors.Join(err, journaled(c.Abort()))
	}
	if err := errors.Join(movedBack(pdir, pname, tobj), movedBack(tdir, tname, pobj)); err != nil {
		if rerr := dirfd.Rename(tdir, tname, pdir, pname, unix.RENAME_EXCHANGE); rerr != nil {
			return "", errors.Join(err, rerr, journaled(c.Done(nil)))
		}
		return "", errors.Join(err, journaled(c.Abort()))
	}
	return "exchanged back", journaled(c.Done(nil))
}

// movedBack checks that the object a rename of undo's just put at name in
// dir is obj, the one it checked before: an object swapped in between
// is not left where undo would have put what it checked.
func movedBack(dir int, name string, obj *journal.Object) error {
	var st unix.Stat_t
	if err := dirfd.Lstat(dir, name, &st); err != nil {
		return err
	}
	if (journal.ID{Dev: st.Dev, Ino: st.Ino}) != obj.ID() {
		return errors.New("changed while undone: another object was moved")
	}
	return nil
}

// unreplace puts back at the rename's new name (tname in tdir, free now)
// what the rename replaced there.
func (u *undoer) unreplace(r *journal.Record, tdir int, tname string) (string, error) {
	rp := r.Replaced
	switch {
	case r.Kept:
		if _, err := u.s.Restore(u.record(journal.MakeOp(rp.Type), r.To, nil), r.Seq, journal.NoKeep, tdir, tname); err != nil {
			return "", fmt.Errorf("moved back, but what it replaced at %s could not be restored: %w", r.To, journaled(err))
		}
		return "moved back; what it replaced restored", nil
	case rp.Type == "dir":
		c, err := u.s.Begin(u.record(journal.OpMkdir, r.To, nil), journal.NoKeep)
		if err != nil {
			return "", journaled(err)
		}
		// Made with no permission bits, so that what the name holds next
		// is known for the directory made here before it is given its
		// owner and mode (madeHere).
		if err := dirfd.Mkdir(tdir, tname, 0); err != nil {
			return "", errors.Join(err, journaled(c.Abort()))
		}
		if testHookAfterMkdir != nil {
			testHookAfterMkdir()
		}
		fd, made, err := madeHere(tdir, tname)
		if err != nil {
			return "", errors.Join(fmt.Errorf("moved back, but %s is not the directory made there: %w", r.To, err), journaled(c.Done(nil)))
		}
		defer dirfd.Close(fd)
		err = errors.Join(dirfd.Chown(fd, int(rp.Uid), int(rp.Gid)), dirfd.Chmod(fd, rp.Mode&0o7777),
			dirfd.Utimens(fd, timespecs(rp)))
		u.standIn[rp.ID()] = made
		if err != nil {
			return "", errors.Join(err, journaled(c.Done(&made.id)))
		}
		return "moved back; the empty directory it replaced made anew", journaled(c.Done(&made.id))
	}
	return "", fmt.Errorf("moved back, but what it replaced at %s was not kept", r.To)
}

// testHookAfterMkdir, set by a test, runs between unreplace's mkdir and
// its open of the directory made.
var testHookAfterMkdir func()

// madeHere opens the directory at name in dir that undo just made with
// no permission bits, checked to be that one: a directory of undo's user
// with none (the set-group-ID bit a parent's passes on aside), which no
// other user can make. What a host process swapped in is refused, and
// left as it is.
func madeHere(dir int, name string) (int, standIn, error) {
	fd, err := dirfd.OpenPath(dir, name)
	if err != nil {
		return -1, standIn{}, err
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(fd, "", &st)
	if err != nil {
		dirfd.Close(fd)
		return -1, standIn{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o777 != 0 || st.Uid != uint32(os.Geteuid()) {
		dirfd.Close(fd)
		return -1, standIn{}, errors.New("changed while undone: another object is at its name")
	}
	return fd, standIn{journal.ID{Dev: st.Dev, Ino: st.Ino}, gen}, nil
}
