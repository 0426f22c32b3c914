package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
)

// The producers of the journal of changes (Options.Journal; the design is
// docs/JOURNAL.md): each op that changes BACKING appends its intent right
// before its system call (journalBegin, or journal.Journal.Remove for
// unlink and rmdir, whose keeping is the change) and its end after it
// (endChange). A failed intent refuses the change: no change without its
// record.

// journalRecord is a record of op on path (a workspace path) by the
// caller of ctx, its owner written as the audit log writes it.
func (f *FS) journalRecord(ctx context.Context, op journal.Op, path string) journal.Record {
	return journal.Record{Owner: string(f.owner(ctx)), Op: op, Path: path}
}

// journalBegin appends rec's intent, keeping keep (journal.NoKeep: none):
// a nil change, and no error, when the mount keeps no journal. A failure
// refuses the change op on name in p (EIO, audited journal:failed, logged
// once).
func (f *FS) journalBegin(ctx context.Context, op string, p admit.Place, name string, rec journal.Record, keep int) (*journal.Change, syscall.Errno) {
	j := f.opts.Journal
	if j == nil {
		return nil, 0
	}
	c, err := j.Begin(rec, keep)
	if err != nil {
		return nil, f.journalFailed(ctx, op, p, name, err)
	}
	return c, 0
}

// journalFailed refuses op on name in p for the journal's failure err.
func (f *FS) journalFailed(ctx context.Context, op string, p admit.Place, name string, err error) syscall.Errno {
	f.logJournalFailure(err)
	return f.gate.Refuse(ctx, op, p, name, errcode.JournalFailed, admit.RuleJournalFailed)
}

// logJournalFailure logs the first failure of the journal.
func (f *FS) logJournalFailure(err error) {
	if f.journalErrLogged.CompareAndSwap(false, true) {
		f.logf("journal: a change could not be recorded, so it was refused (EIO), as every change is until the journal records again: %v", err)
	}
}

// endChange ends c (nil: no journal) as the change's system call went:
// done with after (what it made, nil if the intent said) if err is nil,
// else aborted. A failure to append the end is logged: recovery settles it.
func (f *FS) endChange(c *journal.Change, err error, after *journal.ID) {
	if c == nil {
		return
	}
	var eerr error
	if err == nil {
		eerr = c.Done(after)
	} else {
		eerr = c.Abort()
	}
	if eerr != nil {
		f.logf("journal: ending change %d: %v", c.Seq(), eerr)
	}
}

// journalStat is the object name in the directory held by dir, for a
// record's Before or Replaced (nil if there is none).
func journalStat(dir int, name string) *journal.Object {
	var st unix.Stat_t
	if dirfd.Lstat(dir, name, &st) != nil {
		return nil
	}
	return journal.ObjectOf(&st)
}

// idOf is the identity of the object name in the directory held by dir
// (nil if it cannot be read).
func idOf(dir int, name string) *journal.ID {
	if o := journalStat(dir, name); o != nil {
		id := o.ID()
		return &id
	}
	return nil
}

// journalRemove removes name from the directory held by pfd as an unlink
// or rmdir (AT_REMOVEDIR in flags) does, through the journal when there is one
// (journal.Journal.Remove: the name is renamed into kept/); rel is its
// workspace path.
func (f *FS) journalRemove(ctx context.Context, pfd int, rel, name string, flags int) error {
	j := f.opts.Journal
	if j == nil {
		return dirfd.Unlink(pfd, name, flags)
	}
	jop := journal.OpUnlink
	if flags&unix.AT_REMOVEDIR != 0 {
		jop = journal.OpRmdir
	}
	_, err := j.Remove(f.journalRecord(ctx, jop, rel), pfd, name)
	return err
}

// removeErrno is the errno of a remove's error err (journalRemove): an
// errno as it is; what is none (the journal could not record the removal,
// or the name changed under it) refuses the change, journal:failed.
func (f *FS) removeErrno(ctx context.Context, op string, p admit.Place, name string, err error) syscall.Errno {
	var errno syscall.Errno
	if err == nil || errors.As(err, &errno) || errors.Is(err, dirfd.ErrEscape) {
		return dirfd.Errno(err)
	}
	return f.journalFailed(ctx, op, p, name, err)
}

// fdID is the identity of the object fd holds (nil if fd is -1 or cannot
// be read).
func fdID(fd int) *journal.ID {
	var st unix.Stat_t
	if fd < 0 || dirfd.Fstat(fd, &st) != nil {
		return nil
	}
	return &journal.ID{Dev: st.Dev, Ino: st.Ino}
}

// namedOps are the journal's ops of createNamed's.
var namedOps = map[string]journal.Op{"mkdir": journal.OpMkdir, "mknod": journal.OpMknod, "symlink": journal.OpSymlink}

// journalRename appends the intent of rename r (nil: no journal): Path its
// old name, To its new one, Before the object moved, Replaced the one at
// the new name, kept by link unless a directory (its metadata only) or
// exchanged (an exchange's record names both objects; undoing it is
// another exchange, and nothing is replaced).
func (f *FS) journalRename(ctx context.Context, r *renaming) (*journal.Change, syscall.Errno) {
	if f.opts.Journal == nil {
		return nil, 0
	}
	rec := f.journalRecord(ctx, journal.OpRename, r.oldRel)
	rec.To, rec.Before = r.newRel, journalStat(r.ofd, r.name)
	keep := journal.NoKeep
	if fd, err := dirfd.OpenPath(r.nfd, r.newName); err == nil {
		defer dirfd.Close(fd)
		var st unix.Stat_t
		if dirfd.Fstat(fd, &st) == nil {
			rec.Replaced = journal.ObjectOf(&st)
			if st.Mode&unix.S_IFMT != unix.S_IFDIR && r.flags&unix.RENAME_EXCHANGE == 0 {
				keep = fd
			}
		}
	}
	return f.journalBegin(ctx, "rename", r.to, r.newName, rec, keep)
}

// journalSetattr appends the intent of a change of n's metadata (the
// object fd holds) by in: one record, chmod if the mode changes, else
// chown if the owner does, else utimens, with Before the object's stat,
// which holds all three (nil change: no journal).
func (f *FS) journalSetattr(ctx context.Context, n *Node, fd int, in *fuse.SetAttrIn) (*journal.Change, syscall.Errno) {
	if f.opts.Journal == nil {
		return nil, 0
	}
	op := journal.OpUtimens
	if in.Valid&fuse.FATTR_MODE != 0 {
		op = journal.OpChmod
	} else if in.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		op = journal.OpChown
	}
	rec := f.journalRecord(ctx, op, n.Rel(""))
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return nil, dirfd.Errno(err)
	}
	rec.Before = journal.ObjectOf(&st)
	return f.journalBegin(ctx, "setattr", n, "", rec, journal.NoKeep)
}

// JournalChange is the journal's intent of a commit
// (writeengine.Journal): see there.
func (h engineHost) JournalChange(ctx context.Context, op journal.Op, owner locks.Owner, rel string, before *unix.Stat_t, after *journal.ID, keep int) (func(error), syscall.Errno) {
	f := h.f
	if f.opts.Journal == nil {
		return nil, 0
	}
	rec := journal.Record{Owner: string(owner), Op: op, Path: rel, Before: journal.ObjectOf(before), After: after}
	c, err := f.opts.Journal.Begin(rec, keep)
	if err != nil {
		f.logJournalFailure(err)
		if f.gate.Audit != nil {
			f.gate.Audit.RecordRefusal(ctx, "commit", rel, errcode.JournalFailed, syscall.EIO, admit.RuleJournalFailed, "")
		}
		return nil, syscall.EIO
	}
	return func(err error) { f.endChange(c, err, nil) }, 0
}
