package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/nodeopens"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/locks"
)

// A node's opens and creates: what an open of a file is admitted as (a
// plain reader, a writer joining or starting its owner's write in the
// engine, an open of a coordinated file in place), and the calls on a file
// node's data that need no handle (fallocate, copy_file_range).

// Open opens the regular file n stands for: one openat on (parent fd, name)
// with O_NOFOLLOW, read-only whatever the caller asked, then fstat, and the
// fd is used only if it is the same regular file the node was looked up as.
// A write open takes the lock for the caller's owner and writes go to a
// temp; no descriptor the caller holds writes the file itself.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.gate.AdmitOpen(ctx, "", "open", n, "", writeengine.WriteFlags(flags)); errno != 0 {
		return nil, 0, errno // the owner holds its bound of descriptors (admit.Gate.AdmitOpen)
	}
	fh, fuseFlags, errno := n.open(ctx, "open", flags, true)
	return fh, fuseFlags, openErrno(errno)
}

// open is Open for the kernel (forKernel) or for the daemon's own use (op
// "truncate": a truncate(2) by name), whose handle the kernel never sees.
// Its refusals are audited as op. A write open that meets another owner's
// lock waits for a release on its way (locks.ReleaseWait: only for holds whose
// opener has closed them), and one that met the file just as a commit
// replaced it opens the new file.
func (n *Node) open(ctx context.Context, op string, flags uint32, forKernel bool) (fs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	if f.opts.ReadOnly && writeengine.WriteFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	p := locks.PatienceNow()
	for {
		fh, fuseFlags, errno, again := n.openOnce(ctx, op, flags, forKernel, p)
		if !again {
			return fh, fuseFlags, errno
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openOnce is one try of open. A write open takes the lock in the same
// critical section (commitMu, read) as it verifies the file by name: a
// commit renames its temp over the file and moves its lock to the new file
// under commitMu's write side (writeengine: Write.replace), so the open locks the
// file it opened, never one a commit just replaced. again asks the caller
// to try again: the lock was another owner's hold on its way out and is
// gone now, or the file was replaced before the open joined its lock's write.
func (n *Node) openOnce(ctx context.Context, op string, flags uint32, forKernel bool, p locks.Patience) (_ fs.FileHandle, _ uint32, _ syscall.Errno, again bool) {
	f := n.fsys
	write := writeengine.WriteFlags(flags)
	if forKernel && n.opens.Retired() {
		return nil, 0, syscall.ESTALE, false // the kernel looks the name up again
	}
	pfd, name, pn, done, errno := n.parentFd(ctx)
	defer done()
	if errno != 0 {
		return nil, 0, errno, false
	}
	var owner locks.Owner
	if write {
		owner = f.owner(ctx) // before commitMu: it may read /proc
	}
	coordinated := f.coordinated(pn, name) // before commitMu: it may take go-fuse's locks
	f.commitMu.RLock()
	fd, err := dirfd.Open(pfd, name, unix.O_RDONLY, 0)
	if err != nil {
		f.commitMu.RUnlock()
		if isEscape(err) {
			return nil, 0, f.gate.Refuse(ctx, op, pn, name, errcode.PathEscape, admit.RuleEscapeResolve), false
		}
		return nil, 0, dirfd.Errno(err), false
	}
	var st unix.Stat_t
	err = dirfd.Fstat(fd, &st)
	id := identitySame
	if err == nil {
		id = n.checkIdentity(ctx, pn, name, &st)
	}
	var lease *locks.Lease
	var lockErr error
	inPlace := err == nil && id == identitySame && coordinated && f.inPlaceFile(&st)
	if err == nil && id == identitySame && write && st.Mode&syscall.S_IFMT == syscall.S_IFREG && !inPlace {
		lease, lockErr = f.writeLocks.AcquireMode(locks.KeyOf(&st), owner, locks.ModeFor(flags))
		if lockErr == nil {
			lease.Shared().NoteOpener(caller(ctx).Pid)
		}
	}
	f.commitMu.RUnlock()
	if err == nil {
		errno = n.answerIdentity(ctx, op, pn, name, id)
	}
	if err != nil || errno != 0 {
		dirfd.Close(fd)
		return nil, 0, max(errno, dirfd.Errno(err)), false
	}
	if lockErr != nil {
		dirfd.Close(fd)
		// Only holds whose RELEASE is on its way are waited for, and
		// the lock is tried again, under commitMu, once one went.
		if f.writeLocks.WaitConflict(ctx, locks.KeyOf(&st), owner, locks.ModeFor(flags), p) {
			return nil, 0, 0, true
		}
		holder, _ := f.writeLocks.OtherHolder(locks.KeyOf(&st), owner)
		return nil, 0, f.gate.RefuseHeld(ctx, "open", n, "", locks.KeyOf(&st), holder), false
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		dirfd.Close(fd)
		return nil, 0, f.gate.Refuse(ctx, op, pn, name, errcode.PathEscape, admit.RuleEscapeNotRegular), false
	}
	if errno := n.fsys.gate.DenySelf(ctx, op, n, &st, write); errno != 0 {
		dirfd.Close(fd)
		lease.Release()
		return nil, 0, errno, false
	}
	if inPlace {
		fh, fuseFlags, errno := n.openInPlace(ctx, pn.Rel(name), fd, &st, flags, forKernel)
		return fh, fuseFlags, errno, false
	}
	if write {
		return n.openShared(ctx, owner, lease, fd, pn, pfd, name, &st, flags, forKernel)
	}
	// A reader shares the owner's pending write while it has uncommitted
	// bytes, so a process that reopens a file it is writing sees its own
	// bytes; otherwise the file is all there is to see, and the reader gets
	// a plain handle (passthrough, mmap and exec work as on any file).
	owner = f.owner(ctx)
	if w := f.engine.OwnWrite(owner, locks.KeyOf(&st)); w != nil {
		uncommitted := w.Uncommitted()
		w.Entry().Unlock()
		if uncommitted {
			return n.openShared(ctx, w.Entry().Owner(), nil, fd, pn, pfd, name, &st, flags, forKernel)
		}
	}
	h, fuseFlags := n.newReader(fd, locks.KeyOf(&st), owner)
	if h == nil {
		dirfd.Close(fd)
		return nil, 0, n.retire(), false
	}
	return h, fuseFlags, 0, false
}

// newReader makes the plain read handle for fd, the verified backing file
// with identity key, as n's opens admit it (nodeopens.Set.AdmitReader);
// nil if they refuse it, and n is to be retired.
func (n *Node) newReader(fd int, key locks.Key, owner locks.Owner) (fs.FileHandle, uint32) {
	f := n.fsys
	mode := n.opens.AdmitReader(key, f.opts.Passthrough, time.Now(), time.Unix(0, f.inos.HoldOf(key)))
	if mode == nodeopens.Refused {
		return nil, 0
	}
	h := &readHandle{handle: handle{node: n}, fd: fd, key: key, owner: owner, mode: mode}
	// A read handle has nothing to do at close (it commits nothing; its
	// record locks go at release): spare the round trip.
	fuseFlags := uint32(fuse.FOPEN_NOFLUSH)
	switch mode {
	case nodeopens.Passthrough:
		return &passthroughFile{h}, fuseFlags
	case nodeopens.Direct:
		fuseFlags |= fuse.FOPEN_DIRECT_IO
	}
	return h, fuseFlags
}

// createFile is Create's step under nsMu (shared): the name prepared, the
// file made (O_CREAT|O_EXCL, given to the caller): as the temp alone,
// named temp, where it is published later (FS.publishesLater:
// nameops.Ops.CreateTemp), else at its name, recorded if made at a
// credential path, the journal's record naming owner (the caller's:
// nameops.Ops.Create); st is its stat. It returns the directory's fd, the
// file's, its generation, and the release of the directory's fd (pinned:
// done); EEXIST when the name exists.
func (n *Node) createFile(ctx context.Context, owner locks.Owner, name string, flags, mode uint32, st *unix.Stat_t) (pfd, fd int, gen uint64, temp string, done func(), errno syscall.Errno) {
	f := n.fsys
	defer f.nsLock(false)()
	pfd, dir, done, errno := n.prepare(ctx, "create", name, guard.Makes)
	if errno != 0 {
		return -1, -1, 0, "", noUnpin, errno
	}
	if rel := admit.Join(dir, name); f.publishesLater(n, name, rel, flags) {
		temp = f.engine.NewTempName()
		if fd, gen, errno = f.nameOps.CreateTemp(ctx, n, pfd, rel, name, temp, mode, st); errno != 0 {
			f.engine.TempMade(temp, false)
		}
	} else {
		fd, gen, errno = f.nameOps.Create(ctx, owner, n, pfd, rel, name, mode, st)
	}
	if errno != 0 {
		done()
		return -1, -1, 0, "", noUnpin, errno
	}
	return pfd, fd, gen, temp, done, 0
}

// Create makes a new, empty regular file with O_CREAT|O_EXCL, so the file is
// the one this call made; the name exists from here on, and the caller's
// writes go to a temp like any other write. When the name exists already
// (made outside the mount since the kernel last looked), an open(2) without
// O_EXCL gets the existing file, as it would natively.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	defer n.enter()()
	f := n.fsys
	owner := f.owner(ctx) // once: each resolution polls the caller's pidfd
	if errno := f.gate.AdmitOpen(ctx, owner, "create", n, name, true); errno != 0 {
		return nil, nil, 0, errno
	}
	if errno := n.fsys.contactName(ctx, n, name); errno != 0 {
		return nil, nil, 0, errno
	}
	var st unix.Stat_t
	pfd, fd, gen, temp, done, errno := n.createFile(ctx, owner, name, flags, mode, &st)
	defer done()
	if errno == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		return n.openExisting(ctx, name, flags, out)
	}
	if errno != 0 {
		return nil, nil, 0, openErrno(errno)
	}
	if temp != "" {
		child, fh, fuseFlags, errno := f.createNew(ctx, n, owner, name, flags, pfd, temp, fd, gen, &st, out)
		return child, fh, fuseFlags, openErrno(errno)
	}
	f.fillEntry(out, &st)
	child := n.newChild(ctx, &st, gen)
	var fh fs.FileHandle
	var fuseFlags uint32
	if f.coordinated(n, name) {
		// A new file has no set-ID bit (hostmode.go).
		fh, fuseFlags, errno = asNode(child).openInPlace(ctx, n.Rel(name), fd, &st, flags&^syscall.O_TRUNC|syscall.O_RDWR, true)
	} else {
		// O_CREAT tells openShared the file is new (O_TRUNC has nothing to cut).
		var again bool
		fh, fuseFlags, errno, again = asNode(child).openShared(ctx, owner, nil, fd, n, pfd, name, &st, flags&^syscall.O_TRUNC|syscall.O_CREAT, true)
		if again {
			// Renamed away before its write began: the kernel looks the
			// name up again and opens, or makes, what is there now.
			errno = syscall.ESTALE
		}
	}
	if errno != 0 {
		return nil, nil, 0, openErrno(errno)
	}
	out.SetAttrTimeout(asNode(child).opens.CreatedAttrValid(f.attrTimeout))
	return child, fh, fuseFlags, 0
}

// openExisting answers a create whose name turned out to exist.
func (n *Node) openExisting(ctx context.Context, name string, flags uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	child, errno := n.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if child.Mode()&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil, 0, syscall.EEXIST
	}
	fh, fuseFlags, errno := asNode(child).Open(ctx, flags&^syscall.O_CREAT) // an existing file: not new to openShared
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, fh, fuseFlags, 0
}

// Allocate preallocates or punches holes in the owner's temp, through a
// write handle; a read handle changes nothing (EBADF).
func (n *Node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	switch h := fileOf(fh).(type) {
	case *inPlaceHandle:
		return h.file.Allocate(ctx, off, size, mode)
	case *writeHandle:
		return h.file.Allocate(ctx, off, size, mode)
	}
	return syscall.EBADF
}

// CopyFileRange copies from one handle of this mount into a write handle's
// temp in the backing filesystem, without the data passing through the
// daemon.
func (n *Node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, size uint64, flags uint64) (uint32, syscall.Errno) {
	in, to := fileOf(fhIn), fileOf(fhOut)
	if in == nil || to == nil {
		return 0, syscall.EBADF
	}
	// Both handles passed Open's check; a rename since then could have
	// put either under a credential name, so ask again.
	for _, h := range []openFile{in, to} {
		if errno := n.fsys.gate.DenySelf(ctx, "copy_file_range", h.common().node, nil, false); errno != 0 {
			return 0, errno
		}
	}
	var copied int
	errno := syscall.EBADF // a read handle is read-only
	switch dst := to.(type) {
	case *inPlaceHandle:
		errno = in.withFd(func(src int) syscall.Errno {
			var errno syscall.Errno
			copied, errno = dst.file.CopyIn(ctx, src, offIn, offOut, size, flags)
			return errno
		})
	case *writeHandle:
		tid := caller(ctx).Pid
		switch in := in.(type) {
		case *inPlaceHandle:
			copied, errno = dst.file.CopyIn(ctx, tid, in.file.Fd(), offIn, offOut, size, flags)
		case *readHandle:
			copied, errno = dst.file.CopyIn(ctx, tid, in.fd, offIn, offOut, size, flags)
		case *writeHandle:
			copied, errno = dst.file.CopyFrom(ctx, tid, in.file, offIn, offOut, size, flags)
		}
	}
	return uint32(copied), errno
}

// openInPlace makes the handle of an open of the coordinated file fd
// (verified, O_RDONLY, consumed) at workspace path rel (for the journal),
// with stat st. forKernel: the kernel gets the handle (not the daemon's
// own truncate). A node that holds another version in the kernel's cache,
// or an owner's pending write, is retired instead (ESTALE: the kernel
// looks the name up again).
func (n *Node) openInPlace(ctx context.Context, rel string, fd int, st *unix.Stat_t, flags uint32, forKernel bool) (fs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	write := writeengine.WriteFlags(flags)
	made := f.opts.Credentials != nil && f.guard.Made.Holds(locks.KeyOf(st))
	// Passing through, the kernel reads and writes the backing file without
	// the daemon; go-fuse registers the node's first handle's fd for every
	// later one, so each is read-write (a read-only open's descriptor still
	// cannot write: the kernel checks the open's own mode). Writes to a
	// file the mount made at a credential path restamp it
	// (writeengine.InPlace): the daemon must see them. Nor where the
	// kernel's writes could take root's reserve (FS.passCoord): the
	// daemon's take the room from the gauge first.
	pt := f.passCoord && forKernel && !made
	if write || pt {
		rw, err := dirfd.Reopen(fd, unix.O_RDWR)
		switch {
		case err == nil:
			dirfd.Close(fd)
			fd = rw
		case write:
			dirfd.Close(fd)
			return nil, 0, dirfd.Errno(err)
		default:
			pt = false // a reader of a file the daemon cannot write
		}
	}
	if write && f.journal.J != nil {
		// One record for the open: the writes go in place (through the
		// kernel, where it passes through), none of them kept.
		rec := f.journal.Record(ctx, "", journal.OpInPlace, rel)
		rec.Before = journal.ObjectOf(st)
		c, errno := f.journal.Begin(ctx, "open", rec.Path, rec, journal.NoKeep)
		if errno != 0 {
			dirfd.Close(fd)
			return nil, 0, errno
		}
		f.journal.End(c, nil, nil)
	}
	h := &inPlaceHandle{handle: handle{node: n}, file: f.engine.OpenInPlace(fd, write, made, rel)}
	if flags&syscall.O_TRUNC != 0 && write {
		if errno := h.file.Truncate(0); errno != 0 {
			dirfd.Close(fd)
			return nil, 0, errno
		}
	}
	var keep bool
	if forKernel {
		var ok bool
		if keep, ok = n.opens.AdmitInPlace(locks.KeyOf(st), pt); !ok {
			dirfd.Close(fd)
			return nil, 0, n.retire()
		}
		h.counted, h.passthrough = true, pt
	}
	// No FLUSH: a close commits nothing here. The page cache is every
	// in-place handle's: a later open keeps what the first one filled.
	fuseFlags := uint32(fuse.FOPEN_NOFLUSH)
	if keep {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	if pt {
		return &passthroughInPlace{h}, fuseFlags, 0
	}
	return h, fuseFlags, 0
}

// openShared opens n through the owner's pending write (starting one for a
// write open). base is the verified O_RDONLY fd of the file, named name in
// the directory pn (fd pfd); it is consumed, and so is lease, the owner's
// lock on the file if the caller took it (nil: openShared takes it). again:
// a commit replaced the file since base was opened, and no write of the
// owner's is left to join; the caller opens the name again.
func (n *Node) openShared(ctx context.Context, owner locks.Owner, lease *locks.Lease, base int, pn *Node, pfd int, name string, st *unix.Stat_t, flags uint32, forKernel bool) (fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno, again bool) {
	f := n.fsys
	if !n.opens.AdmitShared(forKernel, time.Now()) {
		dirfd.Close(base)
		lease.Release()
		// Its readers stay on n: the attributes the kernel keeps for them
		// go, as the writer's appends in place may grow the file.
		f.notify.Inode(n.EmbeddedInode())
		return nil, 0, n.retire(), false
	}
	defer func() {
		if errno != 0 || again {
			n.opens.SharedGone()
		}
	}()
	if lease == nil {
		var err error
		// A reader of the owner's write takes the weakest hold.
		mode := locks.Append
		if writeengine.WriteFlags(flags) {
			mode = locks.ModeFor(flags)
		}
		if lease, err = f.acquire(ctx, locks.KeyOf(st), owner, mode); err != nil {
			dirfd.Close(base)
			holder, _ := f.writeLocks.OtherHolder(locks.KeyOf(st), owner)
			return nil, 0, f.gate.RefuseHeld(ctx, "open", n, "", locks.KeyOf(st), holder), false
		}
		lease.Shared().NoteOpener(caller(ctx).Pid)
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	w, again, err := f.engine.Join(e, lease, owner, n, base, pn, pfd, name, st, flags&syscall.O_CREAT != 0)
	if err != nil || again {
		return nil, 0, dirfd.Errno(err), again
	}
	file, err := w.Open(ctx, lease, n, n.StableAttr().Ino, flags, f.processOf(caller(ctx).Pid))
	if err != nil {
		return nil, 0, dirfd.Errno(err), false
	}
	fh = &writeHandle{handle: handle{node: n}, file: file}
	// Direct I/O keeps this owner's uncommitted bytes out of the kernel's
	// page cache, which readers of other owners share.
	return fh, fuse.FOPEN_DIRECT_IO, 0, false
}

// ownChange tells the write in progress on n's file, if any, that this
// mount itself just changed the file's metadata (chmod, link, an xattr);
// apply, if not nil, makes the same change to the temp
// (writeengine.Engine.OwnChange).
func (n *Node) ownChange(apply func(temp int) error) {
	n.fsys.engine.OwnChange(n.key(), apply)
}

// acquire takes the lock on n for owner in mode, waiting for a release
// that is on its way (locks.ReleaseWait).
func (f *FS) acquire(ctx context.Context, key locks.Key, owner locks.Owner, mode locks.Mode) (*locks.Lease, error) {
	return f.writeLocks.AcquireWait(ctx, key, owner, mode, locks.PatienceNow())
}

// ownWrite returns, locked, the caller's own write in progress on the file
// with key; nil if there is none. The caller must unlock w.Entry().
func (f *FS) ownWrite(ctx context.Context, key locks.Key) *pendingWrite {
	return f.engine.OwnWrite(f.owner(ctx), key)
}

// coordinated reports whether name in dir is in the policy's coordinated
// set, by the name alone where the set allows (every open asks): the
// path is built only for a set that looks at directories. It takes
// go-fuse's tree locks: never under commitMu.
func (f *FS) coordinated(dir *Node, name string) bool {
	m := f.opts.Credentials
	if m.CoordinatedByName() {
		return m.Coordinated(name)
	}
	return m.Coordinated(dir.Rel(name))
}

// inPlaceFile reports whether the file with stat st, at a coordinated
// path, may be written in place (see above). The caller holds commitMu
// (read), under which write locks are taken.
func (f *FS) inPlaceFile(st *unix.Stat_t) bool {
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG &&
		st.Mode&(syscall.S_ISUID|syscall.S_ISGID) == 0 && !f.writing(locks.KeyOf(st))
}

// writing reports whether an owner holds the write lock on the backing
// file with key (a write in progress). It asks the lock table only: a
// lookup must not wait for the entry's lock, which a commit holds through
// its fsyncs.
func (f *FS) writing(key locks.Key) bool {
	_, held := f.writeLocks.Holder(key)
	return held
}
