package undo

import (
	"errors"
	"fmt"

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
	return "exchanged back", journaled(c.Done(nil))
}

// unreplace puts back at the rename's new name (tname in tdir, free now)
// what the rename replaced there.
func (u *undoer) unreplace(r *journal.Record, tdir int, tname string) (string, error) {
	rp := r.Replaced
	switch {
	case r.Kept:
		if _, err := u.s.Restore(u.record(makeOp(rp.Type), r.To, nil), r.Seq, journal.NoKeep, tdir, tname); err != nil {
			return "", fmt.Errorf("moved back, but what it replaced at %s could not be restored: %w", r.To, journaled(err))
		}
		return "moved back; what it replaced restored", nil
	case rp.Type == "dir":
		c, err := u.s.Begin(u.record(journal.OpMkdir, r.To, nil), journal.NoKeep)
		if err != nil {
			return "", journaled(err)
		}
		if err := dirfd.Mkdir(tdir, tname, rp.Mode&0o7777); err != nil {
			return "", errors.Join(err, journaled(c.Abort()))
		}
		fd, err := dirfd.OpenPath(tdir, tname)
		if err != nil {
			return "", errors.Join(err, journaled(c.Done(nil)))
		}
		defer dirfd.Close(fd)
		var st unix.Stat_t
		err = errors.Join(dirfd.Chown(fd, int(rp.Uid), int(rp.Gid)), dirfd.Chmod(fd, rp.Mode&0o7777),
			dirfd.Utimens(fd, timespecs(rp)), dirfd.Fstat(fd, &st))
		made := journal.ID{Dev: st.Dev, Ino: st.Ino}
		u.standIn[rp.ID()] = made
		if err != nil {
			return "", errors.Join(err, journaled(c.Done(&made)))
		}
		return "moved back; the empty directory it replaced made anew", journaled(c.Done(&made))
	}
	return "", fmt.Errorf("moved back, but what it replaced at %s was not kept", r.To)
}
