// Package journaling is the producers' side of the journal of changes
// (fusefs/journal; the design is docs/JOURNAL.md): the records the mount's
// operations append, built from what each op judged, and the refusal of a
// change the journal cannot record. Each op that changes BACKING appends
// its intent right before its system call (Producer.Begin, or
// Producer.Remove for unlink and rmdir, whose keeping is the change) and
// its end after it (Producer.End). A failed intent refuses the change
// (EIO, audited journal:failed, logged once): no change without its
// record.
package journaling

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// RuleFailed is the audit rule id of a change refused because the journal
// could not record it.
const RuleFailed = "journal:failed"

// Producer appends the mount's records to its journal.
type Producer struct {
	J     *journal.Journal // nil: the mount keeps no journal
	Audit *audit.Auditor   // nil: no audit lines
	Logf  func(format string, args ...any)
	// Incarnation names an owner's incarnation for its records'
	// OwnerStart (journal.Record): nil is procinfo.IncarnationOf, /proc's.
	Incarnation func(owner string) string
	// Owner names the lock owner of the process that made a request, for
	// a record whose op has not (Record).
	Owner func(ctx context.Context) locks.Owner

	logged atomic.Bool // a failure was logged (the first only is)
}

// On reports whether the mount keeps a journal.
func (p *Producer) On() bool { return p.J != nil }

// KeptLinks is how many of the object (dev, ino)'s links are the
// journal's (journal.Journal.KeptLinks), for the mount to take from its
// st_nlink: 0, at no cost, without a journal.
func (p *Producer) KeptLinks(dev, ino uint64) uint32 {
	if p.J == nil {
		return 0
	}
	return p.J.KeptLinks(dev, ino)
}

// Record is a record of op on path (a workspace path) by owner, written
// as the audit log writes it: the caller of ctx's, resolved here (Owner)
// where the op has not ("") and only for a mount that keeps a journal
// (each resolution polls the caller's pidfd).
func (p *Producer) Record(ctx context.Context, owner locks.Owner, op journal.Op, path string) journal.Record {
	if owner == "" && p.On() {
		owner = p.Owner(ctx)
	}
	return journal.Record{Owner: string(owner), Op: op, Path: path}
}

// Begin appends rec's intent, keeping keep (journal.NoKeep: none), before
// op's change of rel: a nil change, and no error, without a journal. A
// failure refuses the change.
func (p *Producer) Begin(ctx context.Context, op, rel string, rec journal.Record, keep int) (*journal.Change, syscall.Errno) {
	if p.J == nil {
		return nil, 0
	}
	p.stamp(&rec)
	c, err := p.J.Begin(rec, keep)
	if err != nil {
		return nil, p.Failed(ctx, op, rel, err)
	}
	return c, 0
}

// noRoom is ENOSPC for a change the journal refused for want of room
// (journal.RoomError: its record would take root's reserve), audited
// RESOURCE_LIMIT on the first refusal of a burst; ok false for any other
// failure.
func (p *Producer) noRoom(ctx context.Context, op, rel string, err error) (errno syscall.Errno, ok bool) {
	var re *journal.RoomError
	if !errors.As(err, &re) {
		return 0, false
	}
	if re.First && p.Audit != nil {
		p.Audit.RecordCause(ctx, op, rel, errcode.ResourceLimit, syscall.ENOSPC, err)
	}
	return syscall.ENOSPC, true
}

// stamp sets rec's OwnerStart, where the producer did not, to its
// owner's incarnation now: the owner is making the change (its request),
// so the leader or process the incarnation is read from is the owner's.
// A cgroup owner's is "" at no cost.
func (p *Producer) stamp(rec *journal.Record) {
	if rec.OwnerStart != "" {
		return
	}
	if p.Incarnation != nil {
		rec.OwnerStart = p.Incarnation(rec.Owner)
		return
	}
	rec.OwnerStart = string(procinfo.IncarnationOf(procinfo.Owner(rec.Owner)))
}

// Failed refuses op's change of rel for the journal's failure err: EIO,
// audited journal:failed, the first failure logged; ENOSPC where the
// journal had no room (noRoom).
func (p *Producer) Failed(ctx context.Context, op, rel string, err error) syscall.Errno {
	if errno, ok := p.noRoom(ctx, op, rel, err); ok {
		return errno
	}
	if p.logged.CompareAndSwap(false, true) && p.Logf != nil {
		p.Logf("journal: a change could not be recorded, so it was refused (EIO), as every change is until the journal records again: %v", err)
	}
	if p.Audit != nil {
		p.Audit.RecordRefusal(ctx, op, rel, errcode.JournalFailed, syscall.EIO, RuleFailed, "")
	}
	return syscall.EIO
}

// End ends c (nil: no journal) as the change's system call went: done
// with after (what it made; nil if the intent said) if err is nil, else
// aborted. A failure to append the end is logged: recovery settles it.
func (p *Producer) End(c *journal.Change, err error, after *journal.ID) {
	if c == nil {
		return
	}
	var eerr error
	if err == nil {
		eerr = c.Done(after)
	} else {
		eerr = c.Abort()
	}
	if eerr != nil && p.Logf != nil {
		p.Logf("journal: ending change %d: %v", c.Seq(), eerr)
	}
}

// EndMeta ends c (nil: no journal), a change of an object's metadata
// (Setattr), as End does, with st, the object's stat right after it where
// known (stat): its ctime, which undo compares (journal.Record.AfterCtime).
func (p *Producer) EndMeta(c *journal.Change, err error, st *unix.Stat_t, stat bool) {
	if c == nil {
		return
	}
	if err != nil || !stat {
		p.End(c, err, nil)
		return
	}
	if eerr := c.DoneCtime(time.Unix(st.Ctim.Unix()).UTC()); eerr != nil && p.Logf != nil {
		p.Logf("journal: ending change %d: %v", c.Seq(), eerr)
	}
}

// Remove removes name from the directory held by pfd as an unlink, or an
// rmdir (AT_REMOVEDIR in flags), does: through the journal where there is
// one (journal.Journal.Remove: the name renamed into kept/, rec's Op set
// here), else by unlinkat.
func (p *Producer) Remove(rec journal.Record, pfd int, name string, flags int) error {
	if p.J == nil {
		return dirfd.Unlink(pfd, name, flags)
	}
	rec.Op = journal.OpUnlink
	if flags&unix.AT_REMOVEDIR != 0 {
		rec.Op = journal.OpRmdir
	}
	p.stamp(&rec)
	_, err := p.J.Remove(rec, pfd, name)
	return err
}

// RemoveErrno is the errno of Remove's error err: an errno as it is; what
// is none (the journal could not record the removal, or the name changed
// under it) refuses the change (Failed).
func (p *Producer) RemoveErrno(ctx context.Context, op, rel string, err error) syscall.Errno {
	var errno syscall.Errno
	if err == nil || errors.As(err, &errno) || errors.Is(err, dirfd.ErrEscape) {
		return dirfd.Errno(err)
	}
	return p.Failed(ctx, op, rel, err)
}

// Rename appends the intent of a rename of name in the directory held by
// ofd to newName in nfd (rec's Path and To set by the caller): Before the
// object moved, Replaced the one at the new name, kept by link unless a
// directory (its metadata only), exchanged (an exchange's record names
// both objects; undoing it is another exchange, and nothing is replaced)
// or the object moved itself (a rename onto another of its names, which
// changes nothing: a link would stay, one more in its nlink).
func (p *Producer) Rename(ctx context.Context, rec journal.Record, ofd int, name string, nfd int, newName string, exchange bool) (*journal.Change, syscall.Errno) {
	if p.J == nil {
		return nil, 0
	}
	rec.Before = ObjectAt(ofd, name)
	keep := journal.NoKeep
	if fd, err := dirfd.OpenPath(nfd, newName); err == nil {
		defer dirfd.Close(fd)
		var st unix.Stat_t
		if dirfd.Fstat(fd, &st) == nil {
			rec.Replaced = journal.ObjectOf(&st)
			same := rec.Before != nil && rec.Before.ID() == rec.Replaced.ID()
			if st.Mode&unix.S_IFMT != unix.S_IFDIR && !exchange && !same {
				keep = fd
			}
		}
	}
	return p.Begin(ctx, "rename", rec.To, rec, keep)
}

// SetattrOp is the op of a setattr that changes the mode (chmod), else
// the owner (chown), else the times (utimens): one record, whose Before,
// the object's stat, holds all three.
func SetattrOp(mode, owner bool) journal.Op {
	switch {
	case mode:
		return journal.OpChmod
	case owner:
		return journal.OpChown
	}
	return journal.OpUtimens
}

// Setattr appends the intent of a change of the metadata of the object fd
// holds (rec's Op and Path set by the caller; Before, its stat, here).
func (p *Producer) Setattr(ctx context.Context, rec journal.Record, fd int) (*journal.Change, syscall.Errno) {
	if p.J == nil {
		return nil, 0
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(fd, "", &st)
	if err != nil {
		return nil, dirfd.Errno(err)
	}
	// Its generation too: undo gives this owner and mode back only to
	// this object, not to one its inode number was freed to since.
	rec.Before = journal.ObjectOf(&st)
	rec.Before.Gen = gen
	return p.Begin(ctx, "setattr", rec.Path, rec, journal.NoKeep)
}

// Commit appends the intent of a write engine's commit (rec's Op, Path,
// Owner, Before and After set by the caller; keep, its kept fd): end, nil
// without a journal, appends its end.
func (p *Producer) Commit(ctx context.Context, rec journal.Record, keep int) (end func(error), errno syscall.Errno) {
	c, errno := p.Begin(ctx, "commit", rec.Path, rec, keep)
	if c == nil {
		return nil, errno
	}
	return func(err error) { p.End(c, err, nil) }, 0
}

// ObjectAt is the object name in the directory held by dir, for a
// record's Before or Replaced (nil if there is none).
func ObjectAt(dir int, name string) *journal.Object {
	var st unix.Stat_t
	if dirfd.Lstat(dir, name, &st) != nil {
		return nil
	}
	return journal.ObjectOf(&st)
}

// IDAt is the identity of the object name in the directory held by dir
// (nil if it cannot be read).
func IDAt(dir int, name string) *journal.ID {
	if o := ObjectAt(dir, name); o != nil {
		id := o.ID()
		return &id
	}
	return nil
}

// StatID is the identity of the object st is the stat of; nil unless ok
// (the stat was taken).
func StatID(st *unix.Stat_t, ok bool) *journal.ID {
	if !ok {
		return nil
	}
	return &journal.ID{Dev: st.Dev, Ino: st.Ino}
}

// FdID is the identity of the object fd holds (nil if fd is -1 or cannot
// be read).
func FdID(fd int) *journal.ID {
	var st unix.Stat_t
	if fd < 0 || dirfd.Fstat(fd, &st) != nil {
		return nil
	}
	return &journal.ID{Dev: st.Dev, Ino: st.Ino}
}

// NamedOps are the journal's ops of the objects made by name: mkdir,
// mknod, symlink.
var NamedOps = map[string]journal.Op{"mkdir": journal.OpMkdir, "mknod": journal.OpMknod, "symlink": journal.OpSymlink}
