package nameops

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
)

// Remove removes name from dir, whose fd pfd the caller prepared: an
// unlink, or an rmdir (AT_REMOVEDIR in flags), op naming which. A file
// another owner is writing is EBUSY: removing it would drop that owner's
// bytes at its commit, refused like renaming over it. The caller's
// owner's own write of the file goes with the file, as natively.
//
// An unlink's journal record takes the stat of the lock table's look as
// what it removes. The journal checks that what it moved is the object
// its record names, and if the name led to another one by then (a
// change from outside: through the mount the kernel's lock of the
// directory orders the two), puts it back (journal.ErrChanged); Remove
// then looks again, lock table first, as an unlink removes whatever the
// name holds when it runs. A name swapped removeLooks times in a row is
// refused as the journal's failure.
func (o *Ops[N]) Remove(ctx context.Context, op string, dir N, pfd int, at DirPath, name string, flags int) syscall.Errno {
	for look := 1; ; look++ {
		errno, again := o.removeOnce(ctx, op, dir, pfd, at, name, flags, look == removeLooks)
		if !again {
			return errno
		}
	}
}

// removeLooks bounds how often Remove looks at a name that keeps leading
// to another object than its last look found.
const removeLooks = 64

// removeOnce is one look and removal of Remove's; again says to look
// again (not after the last look).
func (o *Ops[N]) removeOnce(ctx context.Context, op string, dir N, pfd int, at DirPath, name string, flags int, last bool) (errno syscall.Errno, again bool) {
	var l guard.FileLock
	var st unix.Stat_t
	looked := false
	if flags == 0 {
		l, looked = o.Gate.Names.LockOfStat(pfd, name, &st)
		if errno := o.Gate.HeldByOther(ctx, "unlink", dir, name, l); errno != 0 {
			return errno, false
		}
	}
	// A journal's record names the name's place now, held still by nsMu
	// (shared) through the removal.
	unlock, rel := func() {}, ""
	if o.Journal.On() {
		unlock = o.LockNames(false)
		rel = admit.Join(o.dirRel(dir, pfd, at), name)
	}
	if flags == 0 {
		if errno := o.keepCredential(dir, pfd, at, name, rel); errno != 0 {
			unlock()
			return errno, false
		}
	}
	// Another name of a made file may stay: its ctime moves.
	mfd := o.Gate.Guard.MadeFd(pfd, name)
	defer dirfd.Close(mfd)
	rec := o.Journal.Record(ctx, "", "", rel)
	if looked && o.Journal.On() { // without a journal, unlinkat needs none
		rec.Before = journal.ObjectOf(&st)
	}
	err := o.Gate.Guard.OwnChange([]int{mfd}, func() error { return o.Journal.Remove(rec, pfd, name, flags) })
	if errors.Is(err, syscall.ENOTEMPTY) && o.Gate.SweepBeforeRmdir(pfd, name) {
		err = o.Journal.Remove(rec, pfd, name, flags)
	}
	unlock()
	if err != nil {
		if !last && errors.Is(err, journal.ErrChanged) {
			return 0, true
		}
		return o.Journal.RemoveErrno(ctx, op, dir.Rel(name), err), false
	}
	if l.Held {
		o.Engine.Removed(l.Key, pfd, name) // the owner's own write goes with the file
	}
	return 0, false
}

// keepCredential saves the identity of a credential whose name (name in
// dir, held by pfd, whose path at says; rel its workspace path, "" if not
// known yet) is about
// to be removed while another link to it stays: the scan of the next
// mount finds a credential by its name, and would not know the other link
// for one (guard.Guard.SaveStore). Written before the removal; a store
// that cannot be written refuses it (EIO): losing the identity would give
// the key out at the next mount.
func (o *Ops[N]) keepCredential(dir N, pfd int, at DirPath, name, rel string) syscall.Errno {
	g := o.Gate.Guard
	if !g.On() || o.MadeStore == "" {
		return 0
	}
	if rel == "" {
		rel = admit.Join(o.dirRel(dir, pfd, at), name)
	}
	if !g.Denied(rel) {
		return 0
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(pfd, name, &st)
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink < 2 {
		return 0
	}
	g.Creds.Add(guard.ID{Key: locks.KeyOf(&st), Gen: gen})
	if err := g.SaveStore(o.MadeStore, o.Backing); err != nil {
		o.Logf("the identity of credential %s cannot be saved, so its removal is refused: %v", rel, err)
		return syscall.EIO
	}
	return 0
}
