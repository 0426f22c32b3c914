package fusefs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// writeHandle is a handle over an owner's write in progress on the file
// (its pendingWrite, on the owner's lock-table entry): it reads the
// owner's temp, or the file while nothing is uncommitted, under the
// entry's lock, and passes each event to the write engine (writeengine),
// which performs what the write protocol decides. A write open makes one; so does a
// read-only open by the owner while it has uncommitted bytes (so that a
// process that reopens a file it is writing reads its own bytes): wh
// counts that one as a reader, which never commits.
type writeHandle struct {
	handle
	lease   *locks.Lease  // this handle's hold on the file
	pending *pendingWrite // the owner's write
	opener  uint32        // the process (thread group) that opened it
	// wh: the handle's state in the write protocol, guarded by the
	// entry's lock.
	wh *writeengine.Handle
	// flags: the open's flags, with O_APPEND as the last WRITE through it
	// carried it (fcntl(F_SETFL) may change it: appends); the access mode
	// and O_APPEND tell its descriptors from those of another open of the
	// file (Flush).
	flags atomic.Uint32
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

var (
	_ = (fs.FileReader)((*writeHandle)(nil))
	_ = (fs.FileWriter)((*writeHandle)(nil))
	_ = (fs.FileFlusher)((*writeHandle)(nil))
	_ = (fs.FileFsyncer)((*writeHandle)(nil))
	_ = (fs.FileReleaser)((*writeHandle)(nil))
	_ = (fs.FileLseeker)((*writeHandle)(nil))
	_ = (openFile)((*writeHandle)(nil))
)

// withPending runs fn on the owner's write in progress under its entry's
// lock.
func (h *writeHandle) withPending(fn func(w *pendingWrite) syscall.Errno) syscall.Errno {
	e := h.lease.Shared()
	e.Lock()
	defer e.Unlock()
	return fn(h.pending)
}

// withSettled is withPending for a commit point: fn runs once no rename
// through the mount moves the file (writeengine.Write.WaitMoves), so that what
// it decides and commits meets the file under the name it has, with the
// write following it.
func (h *writeHandle) withSettled(fn func(w *pendingWrite) syscall.Errno) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno {
		w.WaitMoves()
		return fn(w)
	})
}

// Read serves the owner's temp, or the file while nothing is
// uncommitted, under the entry's lock.
func (h *writeHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var n int
	errno := h.withPending(func(w *pendingWrite) syscall.Errno {
		var err error
		n, err = unix.Pread(w.Cur(), buf, off)
		return toErrno(err)
	})
	return bytesRead(buf[:max(n, 0)]), errno
}

// Write writes into the owner's temp, never the file; the first write
// makes the temp. A short or failed write marks the temp failed: it is
// then never committed. An append with nothing of the owner's uncommitted
// goes into the file in place (writeengine.Write.WriteData).
func (h *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.writes.Add(1)
	defer func() {
		h.lastWriter.Store(caller(ctx).Pid)
		h.lastWrite.Store(time.Now().UnixNano())
		h.writes.Add(-1)
	}()
	appends := h.appends(ctx)
	var n int
	errno := h.withPending(func(w *pendingWrite) (errno syscall.Errno) {
		n, errno = w.WriteData(ctx, h.wh, h.node, appends, data, off)
		return errno
	})
	return uint32(max(n, 0)), errno
}

// appends reports whether a WRITE through h (ctx) appends: O_APPEND as
// the kernel sent it with the write (requestnotes.go), else as h was opened.
// h keeps it for the scans of its opener's descriptors (sameOpen), whose
// flags in /proc show fcntl(F_SETFL)'s change too.
func (h *writeHandle) appends(ctx context.Context) bool {
	flags := h.flags.Load()
	if now, ok := h.node.fsys.writeIns.of(ctx); ok {
		flags = flags&^syscall.O_APPEND | now&syscall.O_APPEND
		h.flags.Store(flags)
	}
	return flags&syscall.O_APPEND != 0
}

// Flush runs at every close(2) of a descriptor of the handle, dup2 over one
// included. It gathers the facts and the write protocol decides
// (writeengine.Write.FlushStart, Flush): it commits when the process that opened the handle closes its
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
//     beside the file otherwise (writeengine: Write.killed);
//   - a close while a write(2) through the same open is in flight in
//     another thread (a WRITE request of it is being served or waits for
//     the entry's lock): committing would publish part of it;
//   - a close while another process of the owner that has written (or
//     truncated) the file through an open of its own still holds it: both
//     write the one temp, and the other's bytes may be half written. Its
//     last close commits both (the write protocol's Writers).
//
// What is left is committed by the owner's last release. The check never
// reads the closing process's stat or status files: a process closing
// descriptors inside execve holds locks that reading them would wait for,
// while it waits for this reply (see procinfo.Resolver.Descriptors).
func (h *writeHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	h.flushed = true
	h.mu.Unlock()
	f := h.node.fsys
	tid := caller(ctx).Pid
	if !writeengine.CloseMayCommit(f.processes.IsThreadOf(h.opener, tid)) {
		return 0
	}
	var may bool
	var inos []uint64
	var like procinfo.SameOpen
	h.withPending(func(w *pendingWrite) syscall.Errno {
		inos, may = w.FlushStart(h.wh)
		if may {
			like = h.sameOpen(w)
		}
		return 0
	})
	if !may {
		return 0
	}
	var facts writeengine.FlushFacts
	c, err := f.processes.Descriptors(tid, inos, f.mountDev.Load(), like)
	switch {
	case err != nil:
		// Not knowing what the opener still holds, leave the commit to the
		// last release, which always comes.
		f.logf("%s: cannot tell whether its opener closed its last descriptor (%v): committing at the last close", h.pending.Place(), err)
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
	return h.withSettled(func(w *pendingWrite) syscall.Errno {
		// A WRITE counts itself before it waits for the entry's lock.
		facts.WriteGoesOn = facts.WriteGoesOn || h.writes.Load() > 0
		return w.Flush(ctx, h.wh, facts, tid)
	})
}

// writeGoesOn reports whether a write(2) through h by a thread other than
// tid, the one closing a descriptor of it, may still be going on. The
// kernel sends a FLUSH of another thread's close while that write is in
// flight (the write holds its own reference to the open file), between two
// of its WRITE requests as well as during one. A WRITE in flight, or one
// that came while this close waited, says yes; otherwise the thread that
// sent the last WRITE is watched (writeengine.WriteWatch) until it is seen out of any
// write(2). Yes defers the commit to the RELEASE, which comes once the
// write(2) returns; the caller rechecks h.writes under the entry's lock,
// which a WRITE counts itself before it waits for.
func (h *writeHandle) writeGoesOn(tid uint32) bool {
	procs := h.node.fsys.processes
	last := h.lastWrite.Load()
	lastAt := time.Unix(0, last)
	var watch writeengine.WriteWatch
	first := true
	for {
		if h.writes.Load() > 0 {
			return true
		}
		w := h.lastWriter.Load()
		if w == tid || w == 0 {
			return false
		}
		if h.lastWrite.Load() != last {
			return true // a WRITE came and went while we waited
		}
		// Read the writer's state once for its user time, then past the
		// gap only: within it nothing but a grown user time says out.
		if since := time.Since(lastAt); first || since >= writeengine.WriteGap {
			first = false
			s, _ := procs.WriterState(w) // an error is WriterUnknown
			if watch.Out(since, writerState(s.State), s.UserTicks) {
				return false
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// writerState is what writeengine.WriteWatch asks of a writer's state.
func writerState(s procinfo.WriterState) writeengine.WriterState {
	switch s {
	case procinfo.WriterBusy:
		return writeengine.WriterBusy
	case procinfo.WriterOnFUSE:
		return writeengine.WriterOnFUSE
	}
	return writeengine.WriterElsewhere
}

// sameOpen says which of the closing process's descriptors of the file
// may be descriptors of h's open: those with its access mode and O_APPEND.
// A read descriptor the opener holds beside its rewrite is another open
// (the kernel's RELEASE of h does not wait for it), and must not hold the
// commit back past close(2). O_APPEND is h's as the last WRITE brought it:
// an fcntl(F_SETFL) since then shows in /proc and not here. So it tells
// the open apart only from another open of the opener with the other
// O_APPEND, which the descriptor may be; with none such, any descriptor of
// the access mode may be h's (counting one too many only defers the
// commit). The caller holds w.entry's lock.
func (h *writeHandle) sameOpen(w *pendingWrite) procinfo.SameOpen {
	flags := h.flags.Load()
	if w.OpenedAs(h.wh, (flags^syscall.O_APPEND)&sameOpenMask) {
		return procinfo.SameOpen{Mask: sameOpenMask, Flags: flags}
	}
	return procinfo.SameOpen{Mask: syscall.O_ACCMODE, Flags: flags}
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
	return h.withSettled(func(w *pendingWrite) syscall.Errno {
		return w.Commit(ctx, durable)
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
	h.withSettled(func(w *pendingWrite) syscall.Errno {
		w.Release(ctx, h.wh, h.node.StableAttr().Ino, flushed, h.lease)
		return 0
	})
	h.node.opens.SharedGone()
	return 0
}

// Lseek answers SEEK_DATA and SEEK_HOLE on the content the owner sees.
func (h *writeHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return seek(h, off, whence)
}

// withFd runs fn on the fd holding the content the owner sees, under the
// entry's lock.
func (h *writeHandle) withFd(fn func(fd int) syscall.Errno) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno { return fn(w.Cur()) })
}

// withTemp runs fn on the owner's temp, making it first; the change fn
// makes is committed with the owner's next commit.
func (h *writeHandle) withTemp(ctx context.Context, fn func(fd int) syscall.Errno) syscall.Errno {
	return h.withPending(func(w *pendingWrite) syscall.Errno {
		return w.Change(h.wh, fn)
	})
}

// copyIn copies size bytes of src at offIn into the owner's temp at
// offOut (copy_file_range); the caller holds the entry's lock, and that of
// src's write if src is another write's content.
func (h *writeHandle) copyIn(ctx context.Context, src int, offIn, offOut, size, flags uint64) (uint32, syscall.Errno) {
	var copied int
	errno := h.pending.Change(nil, func(tmp int) syscall.Errno {
		ri, ro := int64(offIn), int64(offOut)
		c, err := unix.CopyFileRange(src, &ri, tmp, &ro, int(size), int(flags))
		copied = c
		return toErrno(err)
	})
	return uint32(max(copied, 0)), errno
}
