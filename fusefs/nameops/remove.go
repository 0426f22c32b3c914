package nameops

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/locks"
)

// Remove removes name from dir, whose fd pfd the caller prepared: an
// unlink, or an rmdir (AT_REMOVEDIR in flags), op naming which. A file
// another owner is writing is EBUSY: removing it would drop that owner's
// bytes at its commit, refused like renaming over it. The caller's
// owner's own write of the file goes with the file, as natively.
func (o *Ops[N]) Remove(ctx context.Context, op string, dir N, pfd int, name string, flags int) syscall.Errno {
	var l guard.FileLock
	if flags == 0 {
		l = o.Gate.Names.LockOf(pfd, name)
		if errno := o.Gate.HeldByOther(ctx, "unlink", dir, name, l); errno != 0 {
			return errno
		}
	}
	// A journal's record names the name's place now, held still by nsMu
	// (shared) through the removal.
	unlock, rel := func() {}, ""
	if o.Journal.On() {
		unlock = o.lockNames(false)
		rel = admit.Join(o.Gate.DirRel(dir, pfd), name)
	}
	if flags == 0 {
		if errno := o.keepCredential(dir, pfd, name, rel); errno != 0 {
			unlock()
			return errno
		}
	}
	// Another name of a made file may stay: its ctime moves.
	mfd := o.Gate.Guard.MadeFd(pfd, name)
	defer dirfd.Close(mfd)
	rec := o.Journal.Record(ctx, "", "", rel)
	err := o.Gate.Guard.OwnChange([]int{mfd}, func() error { return o.Journal.Remove(rec, pfd, name, flags) })
	if errors.Is(err, syscall.ENOTEMPTY) && o.Gate.SweepBeforeRmdir(pfd, name) {
		err = o.Journal.Remove(rec, pfd, name, flags)
	}
	unlock()
	if err != nil {
		return o.Journal.RemoveErrno(ctx, op, dir.Rel(name), err)
	}
	if l.Held {
		o.Engine.Removed(l.Key, pfd, name) // the owner's own write goes with the file
	}
	return 0
}

// keepCredential saves the identity of a credential whose name (name in
// dir, held by pfd; rel its workspace path, "" if not known yet) is about
// to be removed while another link to it stays: the scan of the next
// mount finds a credential by its name, and would not know the other link
// for one (guard.Guard.SaveStore). Written before the removal; a store
// that cannot be written refuses it (EIO): losing the identity would give
// the key out at the next mount.
func (o *Ops[N]) keepCredential(dir N, pfd int, name, rel string) syscall.Errno {
	g := o.Gate.Guard
	if !g.On() || o.MadeStore == "" {
		return 0
	}
	if rel == "" {
		rel = admit.Join(o.Gate.DirRel(dir, pfd), name)
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
