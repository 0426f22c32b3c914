package writeengine

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// The kernel's events on a write, as the adapter's handles pass them on
// (File): each is told to the protocol (writeproto), which decides, and
// performed here. The caller holds the write's entry's lock (Entry) for
// each; the commit points (File's Flush, Commit, CommitTruncate, Release)
// call waitMoves first.

// Entry is the lock-table entry whose lock guards w (its Owner is the
// write's).
func (w *Write[N]) Entry() *locks.Entry { return w.entry }

// Node is the adapter's node the write began on; Dir, DirFd and Name the
// place it commits to now (its directory's node and O_PATH descriptor,
// and its name there), which a rename through the mount updates.
func (w *Write[N]) Node() N      { return w.node }
func (w *Write[N]) Dir() N       { return w.fileParent }
func (w *Write[N]) DirFd() int   { return w.fileDir }
func (w *Write[N]) Name() string { return w.fileName }

// Uncommitted reports whether the owner has bytes not yet committed (a
// temp): its views of the file are then its own.
func (w *Write[N]) Uncommitted() bool { return w.temp >= 0 }

// Unpublished reports whether the file is still its temp alone, its name
// not yet in BACKING (newfile.go).
func (w *Write[N]) Unpublished() bool { return w.m.Unpublished() }

// Cur is the descriptor of the content the owner sees: its temp, or the
// file while nothing is uncommitted.
func (w *Write[N]) Cur() int { return w.cur() }

// Open joins a handle opened with flags by the process opener, on the
// adapter's node (the kernel inode ino), holding lease, to the write: the
// handle's File. An open with O_TRUNC starts the owner's new content
// empty; if it cannot, the handle is released again (and lease with it)
// and the error returned.
func (w *Write[N]) Open(ctx context.Context, lease *locks.Lease, node N, ino uint64, flags, opener uint32) (*File[N], error) {
	o := writeproto.Open{Write: WriteFlags(flags), Append: flags&syscall.O_APPEND != 0,
		Truncate: flags&syscall.O_TRUNC != 0, Opener: opener, Kind: flags & sameOpenMask, Hold: lease,
		New: w.base < 0 && w.m.State() == writeproto.Idle}
	// Empty as the owner sees it, before any truncation: nothing old to
	// tear. The open that started the write has base's stat already.
	cur, seen := w.observed, w.justStarted
	w.justStarted = false
	o.Fresh = (seen || dirfd.Fstat(w.cur(), &cur) == nil) && cur.Size == 0
	h := w.m.Open(o)
	if o.New {
		w.openNew(h) // its temp is the file, empty (OpenNew)
	} else if h.Truncates() {
		// Truncating is a change: the opener writes from here on.
		w.dropTemp()
		if err := w.ensureTemp(ctx, false); err != nil {
			w.release(ctx, lease.Shared(), lease, h)
			return nil, err
		}
		w.m.Truncated(h)
	}
	w.handleOn(ino, +1)
	f := &File[N]{w: w, lease: lease, node: node, ino: ino, opener: opener, h: h}
	f.flags.Store(flags)
	return f, nil
}

// WriteFlags reports whether an open with flags may change the file: an
// open for writing, or with O_TRUNC or O_APPEND.
func WriteFlags(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}

// writeData writes data at off through h, a handle opened on node via (an
// append, if appends: at the end, whatever off). The owner's temp takes
// it, made on the first write; a short or failed write marks the temp
// failed, and it is then never committed. An append with nothing of the
// owner's uncommitted goes into the file in place (appendData).
func (w *Write[N]) writeData(ctx context.Context, h *writeproto.Handle, via N, appends bool, data []byte, off int64) (int, syscall.Errno) {
	if n, errno, inPlace := w.appendData(ctx, h, via, appends, data); inPlace {
		return n, errno
	}
	if err := w.ensureTemp(ctx, true); err != nil {
		return 0, dirfd.Errno(err)
	}
	w.m.TempWrite(h, appends)
	if appends {
		var st unix.Stat_t
		if err := unix.Fstat(w.temp, &st); err != nil {
			return 0, dirfd.Errno(err)
		}
		off = st.Size
	}
	// Past the room, as a write the file system refused: the temp is
	// failed, and the file keeps what it had.
	var n int
	var err error
	if errno := w.eng.take(ctx, int64(len(data)), w.place); errno != 0 {
		err = errno
	} else {
		n, err = unix.Pwrite(w.temp, data, off)
	}
	var failed syscall.Errno
	if err != nil || n < len(data) {
		failed = max(dirfd.Errno(err), syscall.EIO)
	}
	w.m.TempWritten(n, failed)
	return max(n, 0), dirfd.Errno(err)
}

// change runs fn on the temp, made first, for a change through h (nil:
// not a handle's own: copy_file_range's). A change that failed for want
// of space or by an I/O error marks the temp failed
// (writeproto.Write.ChangeDone).
func (w *Write[N]) change(ctx context.Context, h *writeproto.Handle, fn func(fd int) syscall.Errno) syscall.Errno {
	if h != nil {
		w.m.Changing(h)
	}
	if err := w.ensureTemp(ctx, true); err != nil {
		return dirfd.Errno(err)
	}
	w.m.TempChange()
	errno := fn(w.temp)
	w.m.ChangeDone(errno)
	return errno
}

// copyIn copies size bytes of src at offIn into the owner's temp at
// offOut (copy_file_range); the caller holds w's entry's lock, and that of
// src's write if src is another write's content.
func (w *Write[N]) copyIn(ctx context.Context, src int, offIn, offOut, size, flags uint64) (int, syscall.Errno) {
	var copied int
	errno := w.change(ctx, nil, func(tmp int) syscall.Errno {
		if errno := w.eng.take(ctx, int64(size), w.place); errno != 0 {
			return errno // as the file system's ENOSPC: the temp is failed
		}
		ri, ro := int64(offIn), int64(offOut)
		c, err := unix.CopyFileRange(src, &ri, tmp, &ro, int(size), int(flags))
		copied = c
		return dirfd.Errno(err)
	})
	return max(copied, 0), errno
}

// Setattr takes a metadata change (chmod, chown, utimens) the owner just
// made to the file, whose stat is now st: apply makes it to the temp too,
// if there is one (mode: the change's mode, which the temp takes without
// set-ID bits: new content never keeps a privilege), and st becomes the
// observed file, so that the commit takes it for no change from outside.
func (w *Write[N]) Setattr(st *unix.Stat_t, apply func(temp int, mode uint32) syscall.Errno, mode uint32) syscall.Errno {
	var errno syscall.Errno
	if w.temp >= 0 {
		errno = apply(w.temp, guard.HostFileMode(mode))
	}
	w.observed = *st
	return errno
}
