package writeengine

import (
	"context"
	"syscall"
	"time"

	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// A close of a write handle's descriptor: the facts the protocol's close
// rule needs of the closing thread, gathered from /proc (Processes), and
// the rule's timed part (writeGoesOn).

// Processes is what a close asks of the callers (Config.Procs): the
// reads of /proc that procinfo.Resolver makes.
type Processes interface {
	// IsThreadOf reports whether thread tid belongs to process tgid.
	IsThreadOf(tgid, tid uint32) bool
	// Descriptors is what the closing thread tid still holds of the
	// files on the kernel inodes inos of the mount (device dev) like the
	// open closed, and whether it is exiting.
	Descriptors(tid uint32, inos []uint64, dev uint64, like procinfo.SameOpen) (procinfo.Closing, error)
	// ExitSignal is the signal killing the exiting thread tid.
	ExitSignal(tid uint32) (int, error)
	// WriterState is what the thread tid that wrote last is doing.
	WriterState(tid uint32) (procinfo.WriterSample, error)
}

// Flush is a close(2) of a descriptor of f by the thread tid, dup2 over
// one included. It gathers the facts and the write protocol decides
// (writeproto.Write.FlushStart, Flush): it commits when the process that
// opened the handle closes its last descriptor of the file, so that
// close returns the commit's errors (EIO for WRITE_NOT_ATOMIC, EBUSY for
// LOCK_CONFLICT) to the process that wrote, and a reader that opens the
// file after that close sees the new content. Any other close commits
// nothing:
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
//     beside the file otherwise (Write.killed), once the RELEASEs of the
//     owner's other write opens that their openers closed have landed
//     (awaitReleases);
//   - a close while a write(2) through the same open is in flight in
//     another thread (a WRITE request of it, or a COPY_FILE_RANGE into
//     the file, is being served or waits for the entry's lock):
//     committing would publish part of it;
//   - a close while another process of the owner that has written (or
//     truncated) the file through an open of its own still holds it: both
//     write the one temp, and the other's bytes may be half written. Its
//     last close commits both (the write protocol's Writers).
//
// What is left is committed by the owner's last release. The check never
// reads the closing process's stat or status files: a process closing
// descriptors inside execve holds locks that reading them would wait for,
// while it waits for this reply (see procinfo.Resolver.Descriptors).
func (f *File[N]) Flush(ctx context.Context, tid uint32) syscall.Errno {
	f.flushed.Store(true)
	if !writeproto.CloseMayCommit(f.w.eng.cfg.Procs.IsThreadOf(f.opener, tid)) {
		return 0
	}
	var may bool
	var inos []uint64
	var like procinfo.SameOpen
	f.locked(func(w *Write[N]) syscall.Errno {
		if may = w.m.FlushStart(f.h); may {
			inos, like = w.KernelInos(), f.sameOpen(w)
		}
		return 0
	})
	if !may {
		return 0
	}
	facts := f.closeFacts(tid, inos, like)
	if facts.Signal != 0 {
		f.awaitReleases()
	}
	return f.settled(func(w *Write[N]) syscall.Errno {
		// A WRITE counts itself before it waits for the entry's lock.
		facts.WriteGoesOn = facts.WriteGoesOn || f.writes.Load() > 0
		switch w.m.Flush(f.h, facts) {
		case writeproto.FlushKilled:
			w.killed(ctx, f.h, facts.Signal, tid)
		case writeproto.FlushCommit:
			errno, _ := w.commit(ctx, false)
			return errno
		}
		return 0
	})
}

// closeFacts is what the closing thread tid, of f's opener, still holds
// of the file (its descriptors of the kernel inodes inos like f's open),
// read without the entry's lock, and whether a write(2) through f goes on.
func (f *File[N]) closeFacts(tid uint32, inos []uint64, like procinfo.SameOpen) writeproto.FlushFacts {
	g := f.w.eng
	var facts writeproto.FlushFacts
	c, err := g.cfg.Procs.Descriptors(tid, inos, g.mountDev(), like)
	switch {
	case err != nil:
		// Not knowing what the opener still holds, leave the commit to the
		// last release, which always comes.
		g.host.Logf("%s: cannot tell whether its opener closed its last descriptor (%v): committing at the last close", f.w.place(), err)
		facts.Unknown = true
	case c.Others > 0:
		facts.OthersOpen = true
	default:
		facts.WriteGoesOn = f.writeGoesOn(tid)
		if c.Exiting {
			if sig, err := g.cfg.Procs.ExitSignal(tid); err == nil {
				facts.Signal = sig
			}
		}
	}
	return facts
}

// awaitReleases lets the RELEASEs on their way land before a killed
// opener's close is judged (writeproto.Write.KillAwaits): the kernel
// queued them before this close, and the rule must not count their
// handles as sharing the bytes. It waits, holding no lock, until a
// release leaves the writer alone or one of the others active, or up to
// locks.ReleaseWait: a RELEASE that does not come is a descriptor a forked
// child still holds, and its handle does share them.
func (f *File[N]) awaitReleases() {
	deadline := time.NewTimer(locks.ReleaseWait)
	defer deadline.Stop()
	for {
		var ch chan struct{}
		f.locked(func(w *Write[N]) syscall.Errno {
			if w.m.KillAwaits(f.h) {
				if w.released == nil {
					w.released = make(chan struct{})
				}
				ch = w.released
			}
			return 0
		})
		if ch == nil {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		}
	}
}

// writeGoesOn reports whether a write(2) through f by a thread other than
// tid, the one closing a descriptor of it, may still be going on. The
// kernel sends a FLUSH of another thread's close while that write is in
// flight (the write holds its own reference to the open file), between two
// of its WRITE requests as well as during one. A WRITE in flight, or one
// that came while this close waited, says yes; otherwise the thread that
// sent the last WRITE is watched (writeproto.WriteWatch) until it is seen
// out of any write(2). Yes defers the commit to the RELEASE, which comes
// once the write(2) returns; the caller rechecks f.writes under the
// entry's lock, which a WRITE counts itself before it waits for.
func (f *File[N]) writeGoesOn(tid uint32) bool {
	procs := f.w.eng.cfg.Procs
	last := f.lastWrite.Load()
	lastAt := time.Unix(0, last)
	var watch writeproto.WriteWatch
	first := true
	for {
		if f.writes.Load() > 0 {
			return true
		}
		w := f.lastWriter.Load()
		if w == tid || w == 0 {
			return false
		}
		if f.lastWrite.Load() != last {
			return true // a WRITE came and went while we waited
		}
		// Read the writer's state once for its user time, then past the
		// gap only: within it nothing but a grown user time says out.
		if since := time.Since(lastAt); first || since >= writeproto.WriteGap {
			first = false
			s, _ := procs.WriterState(w) // an error is WriterUnknown
			if watch.Out(since, writerSample(s)) {
				return false
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// writerSample is what writeproto.WriteWatch asks of a writer's sample.
func writerSample(s procinfo.WriterSample) writeproto.WriterSample {
	ws := writeproto.WriterSample{State: writeproto.WriterElsewhere, UserTicks: s.UserTicks}
	switch s.State {
	case procinfo.WriterBusy:
		ws.State = writeproto.WriterBusy
	case procinfo.WriterOnFUSE:
		ws.State = writeproto.WriterOnFUSE
	}
	switch s.Syscall {
	case procinfo.SyscallRunning:
		ws.Syscall = writeproto.SyscallRunning
	case procinfo.SyscallInWrite:
		ws.Syscall = writeproto.SyscallInWrite
	case procinfo.SyscallOutside:
		ws.Syscall = writeproto.SyscallOutside
	}
	return ws
}

// sameOpen says which of the closing process's descriptors of the file
// may be descriptors of f's open: those with its access mode and O_APPEND.
// A read descriptor the opener holds beside its rewrite is another open
// (the kernel's RELEASE of f does not wait for it), and must not hold the
// commit back past close(2). O_APPEND is f's as the last WRITE brought it:
// an fcntl(F_SETFL) since then shows in /proc and not here. So it tells
// the open apart only from another open of the opener with the other
// O_APPEND, which the descriptor may be; with none such, any descriptor of
// the access mode may be f's (counting one too many only defers the
// commit). The caller holds w.entry's lock.
func (f *File[N]) sameOpen(w *Write[N]) procinfo.SameOpen {
	flags := f.flags.Load()
	if w.m.OpenedAs(f.h, (flags^syscall.O_APPEND)&sameOpenMask) {
		return procinfo.SameOpen{Mask: sameOpenMask, Flags: flags}
	}
	return procinfo.SameOpen{Mask: syscall.O_ACCMODE, Flags: flags}
}

// sameOpenMask is what a scan of a process's descriptors tells of an open:
// its access mode and O_APPEND (/proc/PID/fdinfo's flags).
const sameOpenMask = syscall.O_ACCMODE | syscall.O_APPEND
