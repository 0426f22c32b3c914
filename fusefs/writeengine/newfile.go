package writeengine

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// A created file's first version without a second inode. The mount's
// CREATE makes the file as a temp alone (NewTempName; the name stays the
// mount's until the first commit), and the write begins on it with
// nothing to copy and no base (OpenNew): the commit at the close renames
// the temp to the name with RENAME_NOREPLACE (publish), as native code
// writing a new file through a temp does. Readers of other owners and of
// BACKING meet no name until then, and after it the whole file; a kill -9
// of the daemon leaves the temp, which the mount-time sweep removes, and
// no name.
//
// Anything but the write's own handles that reaches the file or its name
// before the commit (a lookup, an open, a stat by another owner, a
// readdir, a rename: fusefs's contacts) first makes it real (MakeReal).
// A temp of appends alone (or nothing) is published as it is, which is
// what appends in place would have shown (publishNow). Any other gets
// the empty file at the name, as a create made it before, with its
// journal record; the node's identity and the write's lock move onto it,
// as a commit moves them the other way (replace). From there on the write
// is any write, and its commit renames the temp over that file.
//
// Every way an unpublished write loses its temp other than publish and
// MakeReal (a failed commit, the protect rule refusing the place, a
// conflict) ends the file: the name was never in BACKING (vanish).

// NewTempName returns the name of a new temp, registered as this engine's
// (the sweep spares it) before the caller makes it; TempMade(name, false)
// forgets it.
func (g *Engine[N]) NewTempName() string {
	name := g.tempName()
	g.TempMade(name, true)
	return name
}

// OpenNew begins owner's write of a file the caller just made as the temp
// tempName (fd, read-write; st its stat) in the directory dir (fd pfd),
// to be published as name, on e (the temp's lock-table entry, whose lock
// the caller holds, taken through lease), and opens its first handle
// (flags, opener: as Write.Open) on node (the kernel inode ino). fd and
// lease are the write's from here on, even on an error, which ends the
// write and removes the temp.
func (g *Engine[N]) OpenNew(ctx context.Context, e *locks.Entry, lease *locks.Lease, owner locks.Owner, node N, ino uint64, dir N, pfd int, name, tempName string, fd int, st *unix.Stat_t, flags, opener uint32) (*File[N], error) {
	tempDir, err1 := dirfd.Dup(pfd)
	fileDir, err2 := dirfd.Dup(pfd)
	if err := errors.Join(err1, err2); err != nil {
		dirfd.Close(tempDir)
		dirfd.Close(fileDir)
		dirfd.Close(fd)
		dirfd.Unlink(pfd, tempName, 0)
		g.TempMade(tempName, false)
		lease.Release()
		return nil, err
	}
	w := &Write[N]{eng: g, node: node, entry: e, fileParent: dir, fileDir: fileDir, fileName: name,
		tempDir: tempDir, base: -1, temp: fd, tempName: tempName, appendFd: -1, observed: *st,
		justStarted: true, seq: g.seq.Add(1)}
	e.Value = w
	if g.host.ChargeWrite(owner) { // admitted with the create (fusefs/admit: Gate.AdmitOpen)
		w.chargedTo = owner
	}
	return w.Open(ctx, lease, node, ino, flags|syscall.O_TRUNC|syscall.O_CREAT, opener)
}

// openNew is Write.Open's step for the handle that made the file: its
// temp is the file, empty, and the open a truncating one (writeproto
// Open.New).
func (w *Write[N]) openNew(h *writeproto.Handle) {
	w.m.TempMade()
	w.m.Truncated(h)
}

// publish puts the sealed temp of an unpublished write at its name, which
// must be free (RENAME_NOREPLACE), under the commit lock, as replace does
// for a file that has a name. The temp is the file the nodes and the lock
// stand for already: nothing moves. It returns the file's stat after the
// rename (which moved its ctime).
func (w *Write[N]) publish() (unix.Stat_t, error) {
	g := w.eng
	var st unix.Stat_t
	defer g.host.LockCommit()()
	if err := dirfd.Rename(w.tempDir, w.tempName, w.fileDir, w.fileName, unix.RENAME_NOREPLACE); err != nil {
		return st, err
	}
	g.TempMade(w.tempName, false)
	if err := dirfd.Fstat(w.temp, &st); err != nil {
		g.host.Logf("%s: published; cannot stat it: %v", w.place(), err)
		st = w.observed
	}
	g.host.Published(w.node, w.fileParent, w.fileName)
	return st, nil
}

// commitNew is the commit of an unpublished write, judged CommitPublish:
// the journal's record of the create (the temp's identity) and publish.
// The caller holds the name lock (unlock releases it) and checked the
// protect rule on the place.
func (w *Write[N]) commitNew(ctx context.Context, unlock func(), syncDir bool) (syscall.Errno, bool) {
	g := w.eng
	st, errno, err := w.publishJournaled(ctx)
	unlock()
	if errno != 0 {
		w.dropTemp() // the journal refused
		return errno, false
	}
	if errors.Is(err, unix.EEXIST) {
		// The host made the name since the look: its file stays, the
		// new one is kept beside it.
		return w.conflictNew(ctx), false
	}
	if err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	if p := g.cfg.AfterReplace; p != nil && *p != nil {
		(*p)()
	}
	return w.settle(ctx, syncDir, &st), true
}

// publishJournaled is publish with the journal's record of the create
// (the temp's identity) around it; the caller holds the name lock
// (Host.LockNames) and checked the protect rule on the place. errno: the
// journal refused, and nothing was done; err: the publish failed.
func (w *Write[N]) publishJournaled(ctx context.Context) (unix.Stat_t, syscall.Errno, error) {
	var ts unix.Stat_t
	if err := dirfd.Fstat(w.temp, &ts); err != nil {
		return ts, 0, err
	}
	end, errno := w.eng.host.JournalCreate(ctx, w.entry.Owner(), w.place())
	if errno != 0 {
		return ts, errno, nil
	}
	st, err := w.publish()
	if end != nil {
		end(err, &journal.ID{Dev: ts.Dev, Ino: ts.Ino})
	}
	return st, 0, err
}

// conflictNew keeps an unpublished write's bytes as a copy beside the
// file the host made at its name meanwhile, and ends the write's file:
// the name is the host's.
func (w *Write[N]) conflictNew(ctx context.Context) syscall.Errno {
	g := w.eng
	if copyName, err := w.keepCopy("conflict"); err != nil {
		g.host.Logf("%s: made outside the mount while created through it; the new bytes are lost: cannot keep them as %s: %v", w.place(), copyName, err)
		w.dropTemp()
	} else {
		g.host.Logf("%s: made outside the mount while created through it; the new bytes are kept as %s", w.place(), copyName)
	}
	w.vanish()
	g.host.NotifyEntry(w.fileParent, w.fileName)
	return g.host.Conflicted(ctx, w.fileParent, w.fileName)
}

// vanish ends an unpublished write's file, whose temp went without a
// publish: the name was never in BACKING, and nothing the write does
// later lands (writeproto: Removed, as if the owner had removed it).
func (w *Write[N]) vanish() {
	if !w.m.Unpublished() {
		return
	}
	w.eng.host.Published(w.node, w.fileParent, w.fileName)
	if w.m.State() != writeproto.Idle && !w.m.IsGone() {
		w.m.Removed()
	}
}

// MakeReal makes the unpublished file of owner's write on the file with
// key real (see above), for a request that reached it or its name; 0 and
// nothing done if there is no such write, or it is published already. A
// refusal of the place (the protect rule: a rename may have moved the
// directory since the create) is the requester's answer; the write stays
// unpublished, and its commit meets the same refusal.
func (g *Engine[N]) MakeReal(ctx context.Context, key locks.Key, owner locks.Owner) syscall.Errno {
	e, ok := g.table.EntryOf(key, owner)
	if !ok {
		return 0
	}
	w := g.locked(e)
	if w == nil {
		return 0
	}
	defer e.Unlock()
	if !w.m.Unpublished() {
		return 0
	}
	if w.temp < 0 {
		w.vanish()
		return 0
	}
	return w.makeReal(ctx)
}

// makeReal is MakeReal of w, whose entry's lock the caller holds. A file
// whose temp holds appends alone (or nothing) is published as it is:
// appends in place would have shown it so. Otherwise the empty file is
// made at the name, and the temp stays the owner's.
func (w *Write[N]) makeReal(ctx context.Context) syscall.Errno {
	g := w.eng
	if !w.m.Overwrites() {
		return w.publishNow(ctx)
	}
	var ts unix.Stat_t
	tempGen, err := dirfd.Statx(w.temp, "", &ts)
	if err != nil {
		return dirfd.Errno(err)
	}
	unlock := g.host.LockNames()
	defer unlock()
	if errno := g.host.DenyCommit(ctx, w); errno != 0 {
		return errno
	}
	end, errno := g.host.JournalCreate(ctx, w.entry.Owner(), w.place())
	if errno != 0 {
		return errno
	}
	fd, st, gen, err := w.emptyLike(&ts)
	if end != nil {
		var made *journal.ID
		if err == nil {
			made = &journal.ID{Dev: st.Dev, Ino: st.Ino}
		}
		end(err, made)
	}
	if errors.Is(err, unix.EEXIST) {
		return 0 // the host made the name: the commit keeps a conflict copy
	}
	if err != nil {
		return dirfd.Errno(err)
	}
	nodes := []N{w.node, g.host.Child(w.fileParent, w.fileName)}
	tempKey := g.table.EntryKey(w.entry)
	unlockCommit := g.host.LockCommit()
	if err := g.table.Rekey(tempKey, locks.KeyOf(&st)); err != nil {
		g.host.Logf("%s: made real; the lock table kept the temp's identity: %v", w.place(), err)
	}
	g.host.Replaced(nodes, tempKey, FileID{Key: tempKey, Gen: tempGen}, FileID{Key: locks.KeyOf(&st), Gen: gen}, &st)
	unlockCommit()
	w.base, w.observed = fd, st
	w.m.MadeReal()
	g.host.Published(w.node, w.fileParent, w.fileName)
	return 0
}

// publishNow is makeReal of a file whose temp holds appends alone: the
// temp is renamed to the name as a commit publishes it (durable with
// durability=full), and becomes the write's base; the owner's next
// appends go into the file in place.
func (w *Write[N]) publishNow(ctx context.Context) syscall.Errno {
	g := w.eng
	full := g.cfg.Durability == DurabilityFull
	if full {
		if err := w.syncTemp(); err != nil {
			return dirfd.Errno(err)
		}
	}
	unlock := g.host.LockNames()
	defer unlock()
	if errno := g.host.DenyCommit(ctx, w); errno != 0 {
		return errno
	}
	st, errno, err := w.publishJournaled(ctx)
	if errno != 0 {
		return errno
	}
	if errors.Is(err, unix.EEXIST) {
		return 0 // the host made the name: the commit keeps a conflict copy
	}
	if err != nil {
		return dirfd.Errno(err)
	}
	w.m.MadeReal()
	w.base, w.temp, w.tempName, w.observed = w.temp, -1, "", st
	w.m.TempGone() // the temp is the file
	if full {
		if err := dirfd.SyncDir(w.fileDir); err != nil {
			g.syncFailed(ctx, StageSyncDir, w.place(), err)
		}
	}
	return 0
}

// emptyLike makes the empty file at the write's name with the owner and
// mode of the temp (ts), as the create gave them: a read-only fd of it,
// its stat and generation.
func (w *Write[N]) emptyLike(ts *unix.Stat_t) (int, unix.Stat_t, uint64, error) {
	var st unix.Stat_t
	fd, err := dirfd.Open(w.fileDir, w.fileName, unix.O_RDONLY|unix.O_CREAT, ts.Mode&0o777)
	if err != nil {
		return -1, st, 0, err
	}
	fail := func(err error) (int, unix.Stat_t, uint64, error) {
		dirfd.Close(fd)
		dirfd.Unlink(w.fileDir, w.fileName, 0)
		return -1, st, 0, err
	}
	if w.eng.cfg.AsRoot {
		if err := chownTemp(fd, ts); err != nil {
			return fail(err)
		}
	}
	if err := dirfd.Chmod(fd, ts.Mode&07777); err != nil {
		return fail(err)
	}
	gen, err := dirfd.Statx(fd, "", &st)
	if err != nil {
		return fail(err)
	}
	return fd, st, gen, nil
}
