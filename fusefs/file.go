package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// handle is what both kinds of file handle of the mount have: the node
// they were opened on, and the lockers that took record locks through them
// (reclock.go), whose locks go when the handle is released, as close(2)
// drops them natively.
type handle struct {
	node *Node

	mu       sync.Mutex
	released bool
	lockers  map[uint64]bool // lockers (reclock.go) that took locks through this handle
}

// common returns the part both kinds of handle share.
func (h *handle) common() *handle { return h }

// noteLocker remembers that locker took a lock through h, to be dropped at
// h's release.
func (h *handle) noteLocker(locker uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lockers == nil {
		h.lockers = make(map[uint64]bool)
	}
	h.lockers[locker] = true
}

// release marks h released, runs also (if not nil) under h.mu in the same
// step, and drops the record locks taken through h: the kernel releases a
// handle when its last descriptor closes. It reports false if h was
// released already.
func (h *handle) release(also func()) bool {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return false
	}
	h.released = true
	lockers := h.lockers
	if also != nil {
		also()
	}
	h.mu.Unlock()
	for locker := range lockers {
		h.node.dropLocker(locker)
	}
	return true
}

// readHandle is a plain read handle: it reads the verified backing file
// through its own fd, the file as it was at open (a commit since replaces
// the file, not what the handle reads, as a descriptor of a file replaced
// by rename does natively). Node.admitReader makes it; it never writes and
// has nothing to commit.
type readHandle struct {
	handle
	fd          int       // of the verified backing file
	key         locks.Key // that file's identity
	passthrough bool      // the kernel may serve reads straight from fd
	cached      bool      // the kernel serves reads through its page cache
}

// writeHandle is a handle over an owner's write in progress on the file
// (its pendingWrite, on the owner's lock-table entry): it reads and writes
// the owner's temp, or the file while nothing is uncommitted, under the
// entry's lock, and tells the write protocol (writeproto) of each event
// through wh, doing what it decides. A write open makes one; so does a
// read-only open by the owner while it has uncommitted bytes (so that a
// process that reopens a file it is writing reads its own bytes): wh
// counts that one as a reader, which never commits.
type writeHandle struct {
	handle
	lease   *locks.Lease  // this handle's hold on the file
	pending *pendingWrite // the owner's write
	opener  uint32        // the process (thread group) that opened it
	// wh: the handle's state in the write protocol (writeproto), guarded
	// by the entry's lock.
	wh *writeproto.Handle
	// flags: the open's flags; the access mode and O_APPEND tell its
	// descriptors from those of another open of the file (Flush).
	flags uint32
	// flushed: a close of one of its descriptors came (FLUSH; guarded by
	// mu). A handle the kernel releases without a FLUSH never reached a
	// process: its open failed after the daemon made it (see Release).
	flushed bool

	// writes counts the WRITE requests of the handle in flight: counted
	// before they wait for the entry's lock, so that a commit holding it
	// sees the write that waits for it (Flush). lastWrite is when the last
	// one ended (UnixNano), lastWriter its thread.
	writes     atomic.Int32
	lastWrite  atomic.Int64
	lastWriter atomic.Uint32
}

// openFile is a file handle of this mount, of either kind. Both serve the
// same FUSE calls on a handle; the node's calls that are handed one (a
// stat, record locks) ask it for the content it sees and whose view that
// is (views.go).
type openFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileReleaser
	fs.FileLseeker

	common() *handle
	// withFd runs fn on the fd holding the content the handle sees.
	withFd(fn func(fd int) syscall.Errno) syscall.Errno
	// answersFor reports whether that content is the caller's view.
	answersFor(ctx context.Context) bool
}

var (
	_ = (fs.NodeOpener)((*Node)(nil))
	_ = (fs.NodeCreater)((*Node)(nil))
	_ = (fs.NodeAllocater)((*Node)(nil))
	_ = (fs.NodeCopyFileRanger)((*Node)(nil))
	_ = (fs.NodeGetlker)((*Node)(nil))
	_ = (fs.NodeSetlker)((*Node)(nil))
	_ = (fs.NodeSetlkwer)((*Node)(nil))

	_ = (fs.FileReader)((*readHandle)(nil))
	_ = (fs.FileWriter)((*readHandle)(nil))
	_ = (fs.FileFlusher)((*readHandle)(nil))
	_ = (fs.FileFsyncer)((*readHandle)(nil))
	_ = (fs.FileReleaser)((*readHandle)(nil))
	_ = (fs.FileLseeker)((*readHandle)(nil))
	_ = (openFile)((*readHandle)(nil))

	_ = (fs.FilePassthroughFder)((*passthroughFile)(nil))

	_ = (fs.FileReader)((*writeHandle)(nil))
	_ = (fs.FileWriter)((*writeHandle)(nil))
	_ = (fs.FileFlusher)((*writeHandle)(nil))
	_ = (fs.FileFsyncer)((*writeHandle)(nil))
	_ = (fs.FileReleaser)((*writeHandle)(nil))
	_ = (fs.FileLseeker)((*writeHandle)(nil))
	_ = (openFile)((*writeHandle)(nil))
)

// passthroughFile is a plain read handle that the kernel serves straight
// from the backing file. It is the only handle type that implements
// fs.FilePassthroughFder: once one is registered, go-fuse gives every later
// open of the node that same backing file (the kernel takes one per inode),
// and a write handle given one would write into the file in place, past the
// temp. Node.admitReader and Node.retire keep each node to one backing file.
type passthroughFile struct{ *readHandle }

// PassthroughFd lets go-fuse register the handle's fd with the kernel.
func (p *passthroughFile) PassthroughFd() (int, bool) { return p.fd, true }

// fileOf returns the handle of this mount behind fh, nil (an untyped nil)
// for any other.
func fileOf(fh fs.FileHandle) openFile {
	switch h := fh.(type) {
	case *readHandle:
		return h
	case *passthroughFile:
		return h.readHandle
	case *writeHandle:
		return h
	}
	return nil
}

// writeFlags reports whether an open with flags may change the file.
func writeFlags(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}

// Open opens the regular file n stands for: one openat on (parent fd, name)
// with O_NOFOLLOW, read-only whatever the caller asked, then fstat, and the
// fd is used only if it is the same regular file the node was looked up as.
// A write open takes the lock for the caller's owner and writes go to a
// temp; no descriptor the caller holds writes the file itself.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.admitOpen(ctx, "", "open", n, ""); errno != 0 {
		return nil, 0, errno // the owner holds its bound of handles (fdcap.go)
	}
	fh, fuseFlags, errno := n.open(ctx, "open", flags, true)
	return fh, fuseFlags, openErrno(errno)
}

// open is Open for the kernel (forKernel) or for the daemon's own use (op
// "truncate": a truncate(2) by name), whose handle the kernel never sees.
// Its refusals are audited as op. A write open that meets another owner's
// lock waits for a release on its way (releaseWait: only for holds whose
// opener has closed them), and one that met the file just as a commit
// replaced it opens the new file.
func (n *Node) open(ctx context.Context, op string, flags uint32, forKernel bool) (fs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	if f.opts.ReadOnly && writeFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	p := patience()
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
// under commitMu's write side (pendingWrite.replace), so the open locks the
// file it opened, never one a commit just replaced. again asks the caller
// to try again: the lock was another owner's hold on its way out and is
// gone now, or the file was replaced before the open joined its lock's write.
func (n *Node) openOnce(ctx context.Context, op string, flags uint32, forKernel bool, p locks.Patience) (_ fs.FileHandle, _ uint32, _ syscall.Errno, again bool) {
	f := n.fsys
	write := writeFlags(flags)
	if forKernel && n.isRetired() {
		return nil, 0, syscall.ESTALE, false // the kernel looks the name up again
	}
	pfd, name, pn, errno := n.parentFd(ctx)
	if errno != 0 {
		return nil, 0, errno, false
	}
	var owner locks.Owner
	if write {
		owner = f.owner(ctx) // before commitMu: it may read /proc
	}
	f.commitMu.RLock()
	fd, err := dirfd.Open(pfd, name, unix.O_RDONLY, 0)
	if err != nil {
		f.commitMu.RUnlock()
		if isEscape(err) {
			return nil, 0, f.refuse(ctx, op, pn, name, errcode.PathEscape, RuleEscapeResolve), false
		}
		return nil, 0, toErrno(err), false
	}
	var st unix.Stat_t
	err = dirfd.Fstat(fd, &st)
	if err == nil {
		errno = n.verify(ctx, op, pn, name, &st)
	}
	var lease *locks.Lease
	var lockErr error
	if err == nil && errno == 0 && write && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		lease, lockErr = f.writeLocks.AcquireMode(keyOf(&st), owner, lockMode(flags))
	}
	f.commitMu.RUnlock()
	if err != nil || errno != 0 {
		dirfd.Close(fd)
		return nil, 0, max(errno, toErrno(err)), false
	}
	if lockErr != nil {
		dirfd.Close(fd)
		// Only holds whose RELEASE is on its way are waited for, and
		// the lock is tried again, under commitMu, once one went.
		if f.writeLocks.WaitConflict(ctx, keyOf(&st), owner, lockMode(flags), p) {
			return nil, 0, 0, true
		}
		return nil, 0, f.refuse(ctx, "open", n, "", errcode.LockConflict, RuleLockOtherOwner), false
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		dirfd.Close(fd)
		return nil, 0, f.refuse(ctx, op, pn, name, errcode.PathEscape, RuleEscapeNotRegular), false
	}
	if errno := n.denyOpen(ctx, op, &st, write); errno != 0 {
		dirfd.Close(fd)
		lease.Release()
		return nil, 0, errno, false
	}
	if write {
		return n.openShared(ctx, owner, lease, fd, pn, pfd, name, &st, flags, forKernel)
	}
	// A reader shares the owner's pending write while it has uncommitted
	// bytes, so a process that reopens a file it is writing sees its own
	// bytes; otherwise the file is all there is to see, and the reader gets
	// a plain handle (passthrough, mmap and exec work as on any file).
	if w := f.ownWrite(ctx, keyOf(&st)); w != nil {
		uncommitted := w.temp >= 0
		w.entry.Unlock()
		if uncommitted {
			return n.openShared(ctx, w.entry.Owner(), nil, fd, pn, pfd, name, &st, flags, forKernel)
		}
	}
	h, fuseFlags, ok := n.admitReader(fd, keyOf(&st))
	if !ok {
		dirfd.Close(fd)
		return nil, 0, n.retire(), false
	}
	return h, fuseFlags, 0, false
}

// openErrno keeps ENOSYS and EOPNOTSUPP from reaching the kernel as the
// answer to an open: ENOSYS to OPEN (or OPENDIR) makes the kernel stop
// sending them for the rest of the connection, and with them every check
// the guard makes at open. A backing filesystem that lacks a call is an
// I/O error here.
func openErrno(errno syscall.Errno) syscall.Errno {
	if errno == syscall.ENOSYS || errno == syscall.EOPNOTSUPP {
		return syscall.EIO
	}
	return errno
}

// admitReader makes the plain read handle for fd, the verified backing file
// with identity key. The kernel serves an inode's read handles through one
// backing file while any of them passes through, and through one page
// cache otherwise, so all of n's plain readers that pass through or read
// through the cache must read the same version of the file: a reader of
// another version (the file was rewritten since they opened it) is not
// admitted, and n is retired. Readers that all read direct may each read
// their own version.
//
// A reader passes through only while no other kind of handle is open on n
// (a direct-I/O handle that was mmapped may hold pages in the cache, and
// the kernel then refuses passthrough opens); otherwise it reads direct,
// through the daemon.
func (n *Node) admitReader(fd int, key locks.Key) (fs.FileHandle, uint32, bool) {
	f := n.fsys
	// The hold of n, or of the file: a node made for the file just before
	// another of its nodes was retired holds off too.
	now := time.Now().UnixNano()
	fileHold := f.holdOf(key)
	n.mu.Lock()
	defer n.mu.Unlock()
	held := now < n.ptHold || now < fileHold
	pt := f.opts.Passthrough && n.cachedOpen.Load() == 0 && !held
	mixed := false
	if n.readers > 0 {
		if n.readKey != key {
			if n.readPT || n.cachedReaders > 0 {
				return nil, 0, false
			}
			// Every reader here reads direct: each handle reads its own
			// version, and none is cached, so the node need not go (a
			// retire is an ESTALE the kernel retries only once).
			mixed = true
		}
		pt = n.readPT // the kernel wants every open of the inode alike
	}
	n.readers++
	n.readKey, n.readPT = key, pt
	h := &readHandle{handle: handle{node: n}, fd: fd, key: key, passthrough: pt}
	// A read handle has nothing to do at close (it commits nothing; its
	// record locks go at release): spare the round trip.
	fuseFlags := uint32(fuse.FOPEN_NOFLUSH)
	if pt {
		return &passthroughFile{h}, fuseFlags, true
	}
	n.cachedOpen.Add(1)
	// Read direct, past the kernel's page cache, where the mount passes
	// through (the cache would hold what this reader read while others
	// pass through), and while the node's size is an owner's pending
	// write's (views.go): a read from the cache stops at that size.
	if f.opts.Passthrough || n.sharedOpen.Load() > 0 || held || mixed {
		fuseFlags |= fuse.FOPEN_DIRECT_IO
	} else {
		h.cached = true
		n.cachedReaders++
	}
	return h, fuseFlags, true
}

// admitShared counts a handle of a pending write on n, unless n has read
// handles that pass through or read through the page cache, which it must
// not join (views.go; passing through, the kernel refuses any open of n
// that does not pass through to the same backing file). The check and the
// count are one step under n.mu, as admitReader's are: a reader admitted
// between them could pass through beside the writer, and the kernel would
// fail the writer's open after the daemon had made its handle. Handles the
// kernel never sees (forKernel false) are always counted.
func (n *Node) admitShared(forKernel bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if forKernel && n.readers > 0 && (n.readPT || n.cachedReaders > 0) {
		return false
	}
	n.cachedOpen.Add(1)
	n.sharedOpen.Add(1)
	// A file written now is likely written again soon: readers that open
	// in the next moment read direct, so that the next write open need
	// not retire the node (an ESTALE the kernel retries only once).
	n.ptHold = max(n.ptHold, time.Now().Add(retireHold).UnixNano())
	return true
}

// sharedGone uncounts a handle of a pending write on n.
func (n *Node) sharedGone() {
	n.cachedOpen.Add(-1)
	n.sharedOpen.Add(-1)
}

// readerGone drops plain read handle h from n's count.
func (n *Node) readerGone(h *readHandle) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.readers--
	if h.cached {
		n.cachedReaders--
	}
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
	if errno := f.admitOpen(ctx, owner, "create", n, name); errno != 0 {
		return nil, nil, 0, errno
	}
	pfd, errno := n.prepare(ctx, "create", name, makes)
	if errno != 0 {
		return nil, nil, 0, openErrno(errno)
	}
	fd, err := dirfd.Open(pfd, name, unix.O_RDWR|unix.O_CREAT, newMode(ctx, pfd, mode))
	if err == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		return n.openExisting(ctx, name, flags, out)
	}
	if err != nil {
		return nil, nil, 0, openErrno(toErrno(err))
	}
	if errno := f.claim(ctx, pfd, fd); errno != 0 {
		dirfd.Close(fd)
		dirfd.Unlink(pfd, name, 0)
		return nil, nil, 0, errno
	}
	var st unix.Stat_t
	gen, errno := statNew(fd, &st)
	if errno != 0 {
		dirfd.Close(fd)
		return nil, nil, 0, errno
	}
	f.madeNew(f.relPath(n, name), &st, gen)
	f.fillEntry(out, &st)
	child := n.newChild(ctx, &st, gen)
	// O_CREAT tells openShared the file is new (O_TRUNC has nothing to cut).
	fh, fuseFlags, errno, _ := asNode(child).openShared(ctx, owner, nil, fd, n, pfd, name, &st, flags&^syscall.O_TRUNC|syscall.O_CREAT, true)
	if errno != 0 {
		return nil, nil, 0, openErrno(errno)
	}
	out.SetAttrTimeout(asNode(child).attrValid()) // in flux from here (views.go)
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

// The read handle's calls.

// Read splices from the verified backing fd: the data does not pass
// through the daemon.
func (h *readHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultFd(uintptr(h.fd), off, len(buf)), 0
}

// Write answers EBADF, as write(2) on a descriptor opened read-only
// does: a read handle is read-only.
func (h *readHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EBADF
}

// Flush has nothing to do: a reader commits nothing (admitReader asks the
// kernel not to send it, FOPEN_NOFLUSH).
func (h *readHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Fsync syncs the file the handle reads.
func (h *readHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return toErrno(unix.Fsync(h.fd))
}

// Release ends the handle when its last descriptor is gone: its record
// locks are dropped, it leaves the node's count of readers (admitReader),
// and its fd closes.
func (h *readHandle) Release(ctx context.Context) syscall.Errno {
	if !h.release(nil) {
		return syscall.EBADF
	}
	if !h.passthrough {
		h.node.cachedOpen.Add(-1)
	}
	h.node.readerGone(h)
	return toErrno(dirfd.Close(h.fd))
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the file the handle reads.
func (h *readHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the handle's own fd.
func (h *readHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno { return fn(h.fd) }

// The write handle's calls.

// withPending runs fn on the owner's write in progress under its entry's
// lock.
func (h *writeHandle) withPending(fn func(w *pendingWrite) syscall.Errno) syscall.Errno {
	e := h.lease.Shared()
	e.Lock()
	defer e.Unlock()
	return fn(h.pending)
}

// Read serves the owner's temp, or the file while nothing is
// uncommitted, under the entry's lock.
func (h *writeHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var n int
	errno := h.withPending(func(w *pendingWrite) syscall.Errno {
		var err error
		n, err = unix.Pread(w.cur(), buf, off)
		return toErrno(err)
	})
	return fuse.ReadResultData(buf[:max(n, 0)]), errno
}

// Write writes into the owner's temp, never the file (commit.go); the
// first write makes the temp. A short or failed write marks the temp
// failed: it is then never committed. An append with nothing of the
// owner's uncommitted goes into the file in place (pending.go).
func (h *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.writes.Add(1)
	defer func() {
		h.lastWriter.Store(caller(ctx).Pid)
		h.lastWrite.Store(time.Now().UnixNano())
		h.writes.Add(-1)
	}()
	var n int
	errno := h.withPending(func(w *pendingWrite) syscall.Errno {
		if w.appendsInPlace(h, caller(ctx).Uid) {
			if w.m.PlaceMoved() {
				if errno := w.node.fsys.denyCommit(ctx, w); errno != 0 {
					return errno
				}
				w.m.PlaceChecked()
			}
			var errno syscall.Errno
			n, errno = w.appendInPlace(h, data)
			return errno
		}
		if err := w.ensureTemp(true, caller(ctx).Uid); err != nil {
			return toErrno(err)
		}
		w.m.TempWrite(h.wh)
		if h.wh.Appends() {
			var st unix.Stat_t
			if err := unix.Fstat(w.temp, &st); err != nil {
				return toErrno(err)
			}
			off = st.Size
		}
		var err error
		n, err = unix.Pwrite(w.temp, data, off)
		var failed syscall.Errno
		if err != nil || n < len(data) {
			failed = max(toErrno(err), syscall.EIO)
		}
		w.m.TempWritten(n, failed)
		return toErrno(err)
	})
	return uint32(max(n, 0)), errno
}

// Flush runs at every close(2) of a descriptor of the handle, dup2 over one
// included. It gathers the facts and the write protocol decides
// (writeproto.Write.FlushStart, Flush): it commits when the process that opened the handle closes its
// last descriptor of the file, so that close returns the commit's errors
// (EIO for WRITE_NOT_ATOMIC, EBUSY for LOCK_CONFLICT) to the process that
// wrote, and a reader that opens the file after that close sees the new
// content. Any other close commits nothing:
//
//   - a close by another process (a child closing an inherited descriptor
//     at exec or exit): the opener may be half way through its writes;
//   - a close while the opener holds another descriptor that may be of
//     the same open (same access mode and O_APPEND: sameOpen): a shell's
//     `cmd > f` opens f, dup2s it to fd 1 and closes the first descriptor
//     before cmd has written anything. A descriptor of another open (a
//     reader beside the rewrite) holds nothing back;
//   - the closes of an opener that a signal is killing: what it wrote is
//     committed where that tears nothing old, and kept as a recovery copy
//     beside the file otherwise (pendingWrite.killed);
//   - a close while a write(2) through the same open is in flight in
//     another thread (a WRITE request of it is being served or waits for
//     the entry's lock): committing would publish part of it;
//   - a close while another process of the owner that has written (or
//     truncated) the file through an open of its own still holds it: both
//     write the one temp, and the other's bytes may be half written. Its
//     last close commits both (writeproto.Write.Writers).
//
// What is left is committed by the owner's last release. The check never
// reads the closing process's stat or status files: a process closing
// descriptors inside execve holds locks that reading them would wait for,
// while it waits for this reply (see locks.Resolver.Descriptors).
func (h *writeHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	h.flushed = true
	h.mu.Unlock()
	f := h.node.fsys
	tid := caller(ctx).Pid
	if !writeproto.CloseMayCommit(f.processes.IsThreadOf(h.opener, tid)) {
		return 0
	}
	var may bool
	h.withPending(func(w *pendingWrite) syscall.Errno {
		may = w.m.FlushStart(h.wh)
		return 0
	})
	if !may {
		return 0
	}
	var facts writeproto.FlushFacts
	c, err := f.processes.Descriptors(tid, h.node.StableAttr().Ino, f.mountDev.Load(), h.sameOpen())
	switch {
	case err != nil:
		// Not knowing what the opener still holds, leave the commit to the
		// last release, which always comes.
		f.logf("%s: cannot tell whether its opener closed its last descriptor (%v): committing at the last close", h.pending.place(), err)
		facts.Unknown = true
	case c.Others > 0:
		facts.OthersOpen = true
	default:
		facts.WriteGoesOn = h.writeGoesOn(tid)
		if c.Exiting {
			if sig, err := f.processes.ExitSignal(tid); err == nil {
				facts.Signal = sig
			}
		}
	}
	return h.withPending(func(w *pendingWrite) syscall.Errno {
		// A WRITE counts itself before it waits for the entry's lock.
		facts.WriteGoesOn = facts.WriteGoesOn || h.writes.Load() > 0
		switch w.m.Flush(h.wh, facts) {
		case writeproto.FlushKilled:
			w.killed(ctx, h, facts.Signal, tid)
		case writeproto.FlushCommit:
			errno, _ := w.commit(ctx, false)
			return errno
		}
		return 0
	})
}

// writeGap bounds the time between two WRITE requests of one write(2):
// the kernel splits a write into requests of at most max_write bytes and
// sends the next as soon as the daemon answers the last.
const writeGap = 10 * time.Millisecond

// writeGoesOn reports whether a write(2) through h by a thread other than
// tid, the one closing a descriptor of it, is still going on. The kernel
// sends a FLUSH of another thread's close while that write is in flight
// (the write holds its own reference to the open file), between two of its
// WRITE requests as well as during one: so a WRITE in flight says yes, and
// when another thread's WRITE ended less than writeGap ago, writeGoesOn
// waits out the gap for the next one. The daemon cannot see a write(2)
// end: this is the one timed rule of the commit protocol. A close right
// after another thread's write waits up to writeGap; a writer thread
// stalled longer than that between two requests of one write(2) can see
// the part before the stall committed (the rest is committed with the
// RELEASE). The caller rechecks h.writes under the entry's lock, which a
// WRITE counts itself before it waits for.
func (h *writeHandle) writeGoesOn(tid uint32) bool {
	last := h.lastWrite.Load()
	for {
		if h.writes.Load() > 0 {
			return true
		}
		if w := h.lastWriter.Load(); w == tid || w == 0 {
			return false
		}
		now := h.lastWrite.Load()
		if now != last {
			return true // a WRITE came and went while we waited
		}
		if time.Since(time.Unix(0, now)) >= writeGap {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// sameOpen says which of the closing process's descriptors of the file
// may be descriptors of h's open: those opened with its access mode and
// O_APPEND. A read descriptor the opener holds beside its rewrite is
// another open (the kernel's RELEASE of h does not wait for it), and must
// not hold the commit back past close(2).
func (h *writeHandle) sameOpen() locks.SameOpen {
	return locks.SameOpen{Mask: sameOpenMask, Flags: h.flags}
}

// sameOpenMask is what a scan of a process's descriptors tells of an open:
// its access mode and O_APPEND (/proc/PID/fdinfo's flags).
const sameOpenMask = syscall.O_ACCMODE | syscall.O_APPEND

// Fsync commits durably, whatever the mount's durability mode.
func (h *writeHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.commit(ctx, true)
}

// commit commits the owner's write under its entry's lock; a durable
// commit with nothing to commit still fsyncs what the owner sees.
func (h *writeHandle) commit(ctx context.Context, durable bool) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno {
		errno, committed := w.commit(ctx, durable)
		if errno == 0 && durable && !committed {
			errno = toErrno(unix.Fsync(w.cur()))
		}
		return errno
	})
}

// Release ends the handle when its last descriptor is gone: its record
// locks are dropped, and the owner's last handle commits what is left
// uncommitted (see Flush) and gives up the write lock.
func (h *writeHandle) Release(ctx context.Context) syscall.Errno {
	var flushed bool
	if !h.release(func() { flushed = h.flushed }) {
		return syscall.EBADF
	}
	h.withPending(func(w *pendingWrite) syscall.Errno {
		// Writes after the last close (through a shared mmap, say) are
		// committed with the owner's last handle. An earlier handle's
		// release must not commit: the kernel sends it after close(2) has
		// returned, and another handle may be half way through a rewrite.
		// The commit reports its own failures (commitFailed, conflict):
		// no caller is left to hear them.
		switch w.m.Release(h.wh, flushed) {
		case writeproto.ReleaseDropTruncate:
			// The open failed in the kernel after the daemon made the
			// handle (passthrough refused beside another open, say): the
			// process never had the file, and its O_TRUNC must not empty it.
			w.node.fsys.logf("%s: an open with O_TRUNC failed in the kernel after the daemon made its handle; the file keeps its content", w.place())
			w.dropTemp()
		case writeproto.ReleaseCommit:
			w.commit(ctx, false)
		}
		w.release(h.lease.Shared(), h.lease, h.wh)
		return 0
	})
	h.node.sharedGone()
	return 0
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the content the owner sees.
func (h *writeHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the fd holding the content the owner sees, under the
// entry's lock.
func (h *writeHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno { return fn(w.cur()) })
}

// withTemp runs fn on the owner's temp, making it first; the change fn
// makes is committed with the owner's next commit.
func (h *writeHandle) withTemp(ctx context.Context, fn func(fd int) syscall.Errno) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno {
		return w.change(h.wh, caller(ctx).Uid, fn)
	})
}

// seek answers SEEK_DATA and SEEK_HOLE on the content h sees.
func seek(h openFile, off uint64, whence uint32) (uint64, syscall.Errno) {
	var n int64
	errno := h.withFd(func(fd int) syscall.Errno {
		var err error
		n, err = unix.Seek(fd, int64(off), int(whence))
		return toErrno(err)
	})
	return uint64(n), errno
}

// change runs fn on the temp, made first, for a change through h (nil:
// not a handle's own) by a process of uid writer; the caller holds
// w.entry's lock. A change that failed for want of space or by an I/O
// error marks the temp failed (writeproto.Write.ChangeDone).
func (w *pendingWrite) change(h *writeproto.Handle, writer uint32, fn func(fd int) syscall.Errno) syscall.Errno {
	if h != nil {
		w.m.Changing(h)
	}
	if err := w.ensureTemp(true, writer); err != nil {
		return toErrno(err)
	}
	w.m.TempChange()
	errno := fn(w.temp)
	w.m.ChangeDone(errno)
	return errno
}

// Allocate preallocates or punches holes in the owner's temp, through a
// write handle; a read handle changes nothing (EBADF).
func (n *Node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	h, ok := fileOf(fh).(*writeHandle)
	if !ok {
		return syscall.EBADF
	}
	return h.withTemp(ctx, func(fd int) syscall.Errno {
		return toErrno(unix.Fallocate(fd, mode, int64(off), int64(size)))
	})
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
		if errno := n.fsys.denyPath(ctx, "copy_file_range", h.common().node, ""); errno != 0 {
			return 0, errno
		}
	}
	dst, ok := to.(*writeHandle)
	if !ok {
		return 0, syscall.EBADF // a read handle is read-only
	}
	switch in := in.(type) {
	case *readHandle:
		defer lockPair(nil, dst.pending)()
		return dst.copyIn(ctx, in.fd, offIn, offOut, size, flags)
	case *writeHandle:
		if in.pending == dst.pending {
			return 0, syscall.EXDEV // same temp on both sides: let the kernel fall back to read/write
		}
		// Both writes' locks are held for the copy, taken in one order so
		// that copies between two files in both directions cannot deadlock.
		defer lockPair(in.pending, dst.pending)()
		return dst.copyIn(ctx, in.pending.cur(), offIn, offOut, size, flags)
	}
	return 0, syscall.EBADF
}

// copyIn copies size bytes of src at offIn into the owner's temp at
// offOut (copy_file_range); the caller holds the entry's lock, and that of
// src's write if src is another write's content.
func (h *writeHandle) copyIn(ctx context.Context, src int, offIn, offOut, size, flags uint64) (uint32, syscall.Errno) {
	var copied int
	errno := h.pending.change(nil, caller(ctx).Uid, func(tmp int) syscall.Errno {
		ri, ro := int64(offIn), int64(offOut)
		c, err := unix.CopyFileRange(src, &ri, tmp, &ro, int(size), int(flags))
		copied = c
		return toErrno(err)
	})
	return uint32(max(copied, 0)), errno
}

// lockPair locks the entries of two different writes in progress (a may be
// nil) in the order the writes began (pendingWrite.seq), the one order in
// which two entries' locks are ever held together, and returns the unlock.
func lockPair(a, b *pendingWrite) func() {
	if a == nil {
		b.entry.Lock()
		return b.entry.Unlock
	}
	first, second := a.entry, b.entry
	if b.seq < a.seq {
		first, second = second, first
	}
	first.Lock()
	second.Lock()
	return func() {
		second.Unlock()
		first.Unlock()
	}
}
