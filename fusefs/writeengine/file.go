package writeengine

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// File is one open of a file through its owner's write in progress (the
// Write, on the owner's lock-table entry): the part of a go-fuse write
// handle that is the write protocol's. It reads the owner's temp, or the
// file while nothing is uncommitted, and passes each kernel event on the
// handle to the protocol, which decides, and performs what it decides:
// the adapter decodes a request, calls one method, answers. Write.Open
// makes one for a write open; and for a read-only open by the owner while
// it has uncommitted bytes (so that a process that reopens a file it is
// writing reads its own bytes): the protocol counts that one as a reader,
// which never commits. Each method takes the entry's lock itself.
type File[N comparable] struct {
	w      *Write[N]    // the owner's write
	lease  *locks.Lease // this handle's hold on the file
	node   N            // the adapter's node it was opened on,
	ino    uint64       // as the kernel inode ino
	opener uint32       // the process (thread group) that opened it
	// h: the handle's state in the write protocol, guarded by the
	// entry's lock.
	h *writeproto.Handle
	// flags: the open's flags, with O_APPEND as the last WRITE through it
	// carried it (fcntl(F_SETFL) may change it: appends); the access mode
	// and O_APPEND tell its descriptors from those of another open of the
	// file (Flush).
	flags atomic.Uint32
	// flushed: a close of one of its descriptors came (FLUSH). A handle
	// the kernel releases without a FLUSH never reached a process: its
	// open failed after the daemon made it (see Release).
	flushed atomic.Bool

	// writes counts the WRITE requests of the handle in flight: counted
	// before they wait for the entry's lock, so that a commit holding it
	// sees the write that waits for it (Flush). lastWrite is when the last
	// one ended (UnixNano), lastWriter its thread.
	writes     atomic.Int32
	lastWrite  atomic.Int64
	lastWriter atomic.Uint32
}

// Pending is the owner's write f is an open of.
func (f *File[N]) Pending() *Write[N] { return f.w }

// locked runs fn on the owner's write in progress under its entry's lock.
func (f *File[N]) locked(fn func(w *Write[N]) syscall.Errno) syscall.Errno {
	e := f.lease.Shared()
	e.Lock()
	defer e.Unlock()
	return fn(f.w)
}

// settled is locked for a commit point: fn runs once no rename through
// the mount moves the file (Write.waitMoves), so that what it decides and
// commits meets the file under the name it has, with the write following
// it.
func (f *File[N]) settled(fn func(w *Write[N]) syscall.Errno) syscall.Errno {
	return f.locked(func(w *Write[N]) syscall.Errno {
		w.waitMoves()
		return fn(w)
	})
}

// Read reads into buf at off the owner's temp, or the file while nothing
// is uncommitted, under the entry's lock.
func (f *File[N]) Read(buf []byte, off int64) (int, syscall.Errno) {
	var n int
	errno := f.locked(func(w *Write[N]) syscall.Errno {
		var err error
		n, err = unix.Pread(w.cur(), buf, off)
		return dirfd.Errno(err)
	})
	return max(n, 0), errno
}

// Write is a WRITE of data at off by the thread tid (flags: the file's
// flags the kernel sent with it, if noted). It writes into the owner's
// temp, never the file; the first write makes the temp. A short or failed
// write marks the temp failed: it is then never committed. An append
// with nothing of the owner's uncommitted goes into the file in place
// (Write.writeData).
func (f *File[N]) Write(ctx context.Context, tid, flags uint32, noted bool, data []byte, off int64) (int, syscall.Errno) {
	defer f.writing(tid)()
	appends := f.appends(flags, noted)
	var n int
	errno := f.locked(func(w *Write[N]) (errno syscall.Errno) {
		n, errno = w.writeData(ctx, f.h, f.node, appends, data, off)
		return errno
	})
	return max(n, 0), errno
}

// writing counts a change of f's temp by thread tid (a WRITE, a
// COPY_FILE_RANGE into f) in flight until the func it returns runs, which
// notes tid and the time as the last write's: a close's FLUSH reads them
// (writeGoesOn). It is called before the entry's lock is waited for, so
// that a close waiting for the lock sees the change coming.
func (f *File[N]) writing(tid uint32) func() {
	f.writes.Add(1)
	return func() {
		f.lastWriter.Store(tid)
		f.lastWrite.Store(time.Now().UnixNano())
		f.writes.Add(-1)
	}
}

// appends reports whether a WRITE through f appends: O_APPEND as the
// kernel sent it with the write (now, if noted), else as f was opened. f
// keeps it for the scans of its opener's descriptors (sameOpen), whose
// flags in /proc show fcntl(F_SETFL)'s change too.
func (f *File[N]) appends(now uint32, noted bool) bool {
	flags := f.flags.Load()
	if noted {
		flags = flags&^syscall.O_APPEND | now&syscall.O_APPEND
		f.flags.Store(flags)
	}
	return flags&syscall.O_APPEND != 0
}

// Commit commits the owner's write (an fsync(2) through f asks it
// durable); a durable commit with nothing to commit still fsyncs what the
// owner sees.
func (f *File[N]) Commit(ctx context.Context, durable bool) syscall.Errno {
	return f.settled(func(w *Write[N]) syscall.Errno {
		errno, committed := w.commit(ctx, durable)
		if errno == 0 && durable && !committed {
			errno = dirfd.Errno(dirfd.Fsync(w.cur()))
		}
		return errno
	})
}

// CommitTruncate commits a truncate(2) by name, made through f, a handle
// of its own, unless another of the owner's handles writes: that one's
// close commits it.
func (f *File[N]) CommitTruncate(ctx context.Context) syscall.Errno {
	return f.settled(func(w *Write[N]) syscall.Errno {
		if !w.m.TruncateCommits() {
			return 0
		}
		errno, _ := w.commit(ctx, false)
		return errno
	})
}

// Release ends f when the kernel releases it (its last descriptor is
// gone): the owner's last handle commits what is left uncommitted (see
// Flush) and gives up the write lock. Writes after the last close
// (through a shared mmap, say) are committed with the owner's last
// handle. An earlier handle's release must not commit: the kernel sends
// it after close(2) has returned, and another handle may be half way
// through a rewrite. The commit reports its own failures (commitFailed,
// conflict): no caller is left to hear them.
func (f *File[N]) Release(ctx context.Context) {
	flushed := f.flushed.Load()
	f.settled(func(w *Write[N]) syscall.Errno {
		w.handleOn(f.ino, -1)
		switch w.m.Release(f.h, flushed) {
		case writeproto.ReleaseDropTruncate:
			// The open failed in the kernel after the daemon made the
			// handle (passthrough refused beside another open, say): the
			// process never had the file, and its O_TRUNC must not empty it.
			w.eng.host.Debugf("%s: an open with O_TRUNC failed in the kernel after the daemon made its handle; the file keeps its content", w.place())
			w.dropTemp()
		case writeproto.ReleaseCommit:
			w.commit(ctx, false)
		}
		w.release(ctx, f.lease.Shared(), f.lease, f.h)
		return 0
	})
}

// WithCur runs fn on the fd holding the content the owner sees, under the
// entry's lock.
func (f *File[N]) WithCur(fn func(fd int) syscall.Errno) syscall.Errno {
	return f.locked(func(w *Write[N]) syscall.Errno { return fn(w.cur()) })
}

// Change runs fn on the owner's temp, making it first; the change fn
// makes is committed with the owner's next commit.
func (f *File[N]) Change(ctx context.Context, fn func(fd int) syscall.Errno) syscall.Errno {
	return f.locked(func(w *Write[N]) syscall.Errno { return w.change(ctx, f.h, fn) })
}

// Truncate sets the size of the owner's new content (a change of its
// temp: ftruncate(2), or truncate(2) by name through a handle of its own).
func (f *File[N]) Truncate(ctx context.Context, size uint64) syscall.Errno {
	return f.Change(ctx, func(fd int) syscall.Errno { return dirfd.Errno(unix.Ftruncate(fd, int64(size))) })
}

// Allocate preallocates or punches holes in the owner's temp
// (fallocate(2)).
func (f *File[N]) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.Change(ctx, func(fd int) syscall.Errno {
		if errno := f.w.eng.take(ctx, allocates(mode, size), f.w.place); errno != 0 {
			return errno
		}
		return dirfd.Errno(unix.Fallocate(fd, mode, int64(off), int64(size)))
	})
}

// allocates is how many bytes a fallocate(2) of size in mode may take
// from the file system: none for one that frees blocks.
func allocates(mode uint32, size uint64) int64 {
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_COLLAPSE_RANGE) != 0 {
		return 0
	}
	return int64(size)
}

// CopyIn copies size bytes of src, a descriptor no write in progress
// holds (a reader's, a coordinated file's), at offIn into the owner's
// temp at offOut (copy_file_range(2) by thread tid: a write of f, as a
// WRITE is, for the close rule).
func (f *File[N]) CopyIn(ctx context.Context, tid uint32, src int, offIn, offOut, size, flags uint64) (int, syscall.Errno) {
	defer f.writing(tid)()
	defer lockPair(nil, f.w)()
	return f.w.copyIn(ctx, src, offIn, offOut, size, flags)
}

// CopyFrom copies size bytes of the content src's owner sees at offIn
// into f's owner's temp at offOut (for thread tid, as CopyIn). Both
// writes' locks are held for the copy, taken in one order so that copies
// between two files in both directions cannot deadlock. The one write on
// both sides (the same temp) is EXDEV: the kernel falls back to read and
// write.
func (f *File[N]) CopyFrom(ctx context.Context, tid uint32, src *File[N], offIn, offOut, size, flags uint64) (int, syscall.Errno) {
	if src.w == f.w {
		return 0, syscall.EXDEV
	}
	defer f.writing(tid)()
	defer lockPair(src.w, f.w)()
	return f.w.copyIn(ctx, src.w.cur(), offIn, offOut, size, flags)
}

// lockPair locks the entries of two different writes in progress (a may be
// nil) in the order the writes began (Write.seq), the one order in which
// two entries' locks are ever held together, and returns the unlock.
func lockPair[N comparable](a, b *Write[N]) func() {
	if a == nil {
		b.entry.Lock()
		return b.entry.Unlock
	}
	first, second := a, b
	if b.seq < a.seq {
		first, second = b, a
	}
	first.entry.LockOrdered(first.seq)
	second.entry.LockOrdered(second.seq)
	return func() {
		second.entry.Unlock()
		first.entry.Unlock()
	}
}
