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

// The kernel's events on a write, as the adapter's handles pass them on:
// each is told to the protocol (writeproto), which decides, and performed
// here. The caller holds the write's entry's lock (Entry) for each; the
// commit points (Flush, Commit, CommitTruncate, Release) call WaitMoves
// first.

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

// Seq orders the writes of a mount by when they began: two entries' locks
// are taken together in its order (fusefs lockPair).
func (w *Write[N]) Seq() uint64 { return w.seq }

// Uncommitted reports whether the owner has bytes not yet committed (a
// temp): its views of the file are then its own.
func (w *Write[N]) Uncommitted() bool { return w.temp >= 0 }

// Cur is the descriptor of the content the owner sees: its temp, or the
// file while nothing is uncommitted.
func (w *Write[N]) Cur() int { return w.cur() }

// Place is the workspace path of the file being written, for logs and
// audit lines.
func (w *Write[N]) Place() string { return w.place() }

// Open joins a handle opened with o (on the kernel inode ino, holding
// lease) to the write: the protocol's handle for it. An open with O_TRUNC
// starts the owner's new content empty; if it cannot, the handle is
// released again (and lease with it) and the error returned.
func (w *Write[N]) Open(ctx context.Context, lease *locks.Lease, o Open, ino uint64) (*Handle, error) {
	// Empty as the owner sees it, before any truncation: nothing old to tear.
	var cur unix.Stat_t
	o.Fresh = dirfd.Fstat(w.cur(), &cur) == nil && cur.Size == 0
	h := w.m.Open(o)
	if h.Truncates() {
		// Truncating is a change: the opener writes from here on.
		w.dropTemp()
		if err := w.ensureTemp(false); err != nil {
			w.release(ctx, lease.Shared(), lease, h)
			return nil, err
		}
		w.m.Truncated(h)
	}
	w.handleOn(ino, +1)
	return h, nil
}

// WriteData writes data at off through h, a handle opened on node via (an
// append, if appends: at the end, whatever off). The owner's temp takes
// it, made on the first write; a short or failed write marks the temp
// failed, and it is then never committed. An append with nothing of the
// owner's uncommitted goes into the file in place (appendsInPlace).
func (w *Write[N]) WriteData(ctx context.Context, h *Handle, via N, appends bool, data []byte, off int64) (int, syscall.Errno) {
	if w.appendsInPlace(h, appends) {
		if w.m.PlaceMoved() {
			if errno := w.eng.host.DenyCommit(ctx, w); errno != 0 {
				return 0, errno
			}
			w.m.PlaceChecked()
		}
		return w.appendInPlace(h, via, data)
	}
	if err := w.ensureTemp(true); err != nil {
		return 0, toErrno(err)
	}
	w.m.TempWrite(h, appends)
	if appends {
		var st unix.Stat_t
		if err := unix.Fstat(w.temp, &st); err != nil {
			return 0, toErrno(err)
		}
		off = st.Size
	}
	n, err := unix.Pwrite(w.temp, data, off)
	var failed syscall.Errno
	if err != nil || n < len(data) {
		failed = max(toErrno(err), syscall.EIO)
	}
	w.m.TempWritten(n, failed)
	return max(n, 0), toErrno(err)
}

// FlushStart tells a close through h by a thread of its opener: it
// reports whether the close may commit, and if so the kernel inodes the
// write's handles were opened on, whose descriptors the adapter then
// looks for in the opener (FlushFacts) without the entry's lock.
func (w *Write[N]) FlushStart(h *Handle) (inos []uint64, may bool) {
	if !w.m.FlushStart(h) {
		return nil, false
	}
	return w.KernelInos(), true
}

// OpenedAs reports whether a handle of the write other than h was opened
// by h's opener with kind (writeproto.Write.OpenedAs): which of the
// opener's descriptors a close's scan may take for h's.
func (w *Write[N]) OpenedAs(h *Handle, kind uint32) bool { return w.m.OpenedAs(h, kind) }

// Flush performs what the protocol decides of a close through h by its
// opener's thread tid, given what the adapter found (facts): a commit,
// the settling of a killed writer's bytes, or nothing. Its errno is the
// close's.
func (w *Write[N]) Flush(ctx context.Context, h *Handle, facts FlushFacts, tid uint32) syscall.Errno {
	switch w.m.Flush(h, facts) {
	case writeproto.FlushKilled:
		w.killed(ctx, h, facts.Signal, tid)
	case writeproto.FlushCommit:
		errno, _ := w.commit(ctx, false)
		return errno
	}
	return 0
}

// Commit commits the owner's write (fsync(2) asks it durable); a durable
// commit with nothing to commit still fsyncs what the owner sees.
func (w *Write[N]) Commit(ctx context.Context, durable bool) syscall.Errno {
	errno, committed := w.commit(ctx, durable)
	if errno == 0 && durable && !committed {
		errno = toErrno(unix.Fsync(w.cur()))
	}
	return errno
}

// CommitTruncate commits a truncate(2) by name, made through a handle of
// its own, unless another of the owner's handles writes: that one's close
// commits it.
func (w *Write[N]) CommitTruncate(ctx context.Context) syscall.Errno {
	if !w.m.TruncateCommits() {
		return 0
	}
	errno, _ := w.commit(ctx, false)
	return errno
}

// Release ends h, opened on the kernel inode ino and holding lease, when
// the kernel releases it (flushed: a close of it came before). Writes
// after the last close (through a shared mmap, say) are committed with
// the owner's last handle. An earlier handle's release must not commit:
// the kernel sends it after close(2) has returned, and another handle may
// be half way through a rewrite. The commit reports its own failures
// (commitFailed, conflict): no caller is left to hear them.
func (w *Write[N]) Release(ctx context.Context, h *Handle, ino uint64, flushed bool, lease *locks.Lease) {
	w.handleOn(ino, -1)
	switch w.m.Release(h, flushed) {
	case writeproto.ReleaseDropTruncate:
		// The open failed in the kernel after the daemon made the handle
		// (passthrough refused beside another open, say): the process
		// never had the file, and its O_TRUNC must not empty it.
		w.eng.host.Debugf("%s: an open with O_TRUNC failed in the kernel after the daemon made its handle; the file keeps its content", w.place())
		w.dropTemp()
	case writeproto.ReleaseCommit:
		w.commit(ctx, false)
	}
	w.release(ctx, lease.Shared(), lease, h)
}

// Change runs fn on the temp, made first, for a change through h (nil:
// not a handle's own: copy_file_range's). A change that failed for want
// of space or by an I/O error marks the temp failed
// (writeproto.Write.ChangeDone).
func (w *Write[N]) Change(h *Handle, fn func(fd int) syscall.Errno) syscall.Errno {
	if h != nil {
		w.m.Changing(h)
	}
	if err := w.ensureTemp(true); err != nil {
		return toErrno(err)
	}
	w.m.TempChange()
	errno := fn(w.temp)
	w.m.ChangeDone(errno)
	return errno
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
