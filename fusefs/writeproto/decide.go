package writeproto

import "time"

// Decisions of a commit that read no state of the write: pure functions
// of facts the caller gathers, here so that every commit decision is the
// machine's (issue 29: they stayed in fusefs). The write engine asks each
// in one call: its syncPlan SyncPlan, its replacesEmpty ReplacesEmpty,
// its File.writeGoesOn a WriteWatch fed the procinfo sample mapped to a
// WriterSample; its seal's check of a failed temp is the case
// StartRefuse of Commit's answer.

// SyncPlan says which fsyncs a commit makes: of the temp before the rename
// and of the directory after it. An fsync(2) (asked) makes both, whatever
// the mount's durability: the rename puts what it synced at the name, and
// without the directory's fsync a power loss could give the name its old
// content back. But for a file whose name is new (newName: the first
// version of a file made through the mount, published by this commit)
// with atomic durability: as POSIX has it, an fsync(2) makes the file's
// data durable, and its new name takes an fsync of the directory (an
// editor's save of a temp: its fsync, then its rename). With full
// durability (full) a commit makes both, its close's promise, but for
// one that replaces an empty file on a filesystem that writes a renamed
// file's data before the rename (emptyOrdered: journaled ext4): there
// nothing old can be torn, the rename lands only with the data, and the
// directory's fsync after it makes both durable. Atomic durability syncs
// nothing unasked.
func SyncPlan(asked, full, emptyOrdered, newName bool) (temp, dir bool) {
	switch {
	case asked:
		return true, full || !newName
	case full:
		return !emptyOrdered, true
	}
	return false, false
}

// ReplacesEmpty reports whether a commit replaces an empty file with one
// name (the file as the owner last saw it commit: its size and link
// count), whose old content cannot be torn (SyncPlan). A link made since
// changed its ctime: that commit is a conflict, not a commit in place.
func ReplacesEmpty(size int64, nlink uint64) bool { return size == 0 && nlink <= 1 }

// How long a close waits to learn whether another thread's write(2)
// through the same open goes on (WriteWatch). WriteGap: the time a next
// WRITE request of one write(2) comes within after the last was answered,
// on a machine that runs the writer at once. WriteStall: the most a close
// waits beyond that for a writer that is runnable or in the kernel and has
// not been back in its own code, on a loaded machine that keeps it waiting
// for a CPU between two requests (seen: over 100 ms beside stress-ng).
const (
	WriteGap   = 10 * time.Millisecond
	WriteStall = time.Second
)

// WriterState is what a sample of a writer thread tells of where it is
// (the caller reads it from /proc).
type WriterState int

const (
	// WriterElsewhere: asleep anywhere but on a FUSE answer, gone, or not
	// to be read: not inside a write(2) to the mount.
	WriterElsewhere WriterState = iota
	// WriterOnFUSE: asleep waiting for the answer to a FUSE request: the
	// next WRITE of its write(2) may be queued.
	WriterOnFUSE
	// WriterBusy: running, waiting for a CPU, or asleep uninterruptibly:
	// it may be between two requests of one write(2).
	WriterBusy
)

// WriterSyscall is what a sample tells of the writer and write(2): the
// system call it is stopped in, when it is not on a CPU.
type WriterSyscall int

const (
	// SyscallUnknown: not known (not read, or not to be read).
	SyscallUnknown WriterSyscall = iota
	// SyscallRunning: it is on a CPU, anywhere.
	SyscallRunning
	// SyscallInWrite: it is stopped inside a write(2) or its kin.
	SyscallInWrite
	// SyscallOutside: it is stopped outside any: the write(2) that sent
	// the last WRITE has returned.
	SyscallOutside
)

// A WriterSample is one look at the writer: its state, its user time in
// clock ticks, and where its system call is.
type WriterSample struct {
	State     WriterState
	UserTicks uint64
	Syscall   WriterSyscall
}

// A WriteWatch tells, one sample at a time, when the thread that sent an
// open's last WRITE is out of that write(2): the rule of a close
// (FlushFacts.WriteGoesOn). The daemon cannot see a write(2) end. What it
// can see for certain, of a thread that is not on a CPU: whether it is
// stopped inside a write(2) (between two of its requests, or waiting for
// the answer to one) or outside any; outside, it is out. Otherwise it
// falls back on time: the next WRITE of one write(2) comes within WriteGap
// of the last one's answer unless the writer waits for a CPU, a page, or
// the daemon to read its request; between two of its requests the writer
// is in the kernel (WriterBusy) or asleep waiting for the answer to its
// next request (WriterOnFUSE). So the writer is out:
//
//   - at once, seen stopped outside any write(2);
//   - once its user time grew by two ticks since the first sample: it ran
//     more than a tick's time (10 ms), which no gap between two requests
//     of one write(2) takes on a CPU (one tick may be the kernel's scaling
//     of time spent in the kernel, see procinfo.WriterSample);
//   - past WriteGap, when it is asleep elsewhere;
//   - asleep on a FUSE answer and not known to be inside a write(2), one
//     WriteGap later (its next WRITE would have come; a writer that does
//     something else on a mount sleeps there too, and a close must not
//     wait on it);
//   - busy, or asleep on a FUSE answer inside a write(2), past WriteGap +
//     WriteStall. A writer kept from running longer (or whose request the
//     daemon does not read for that long) can see the part before the
//     stall committed (the rest is committed at the RELEASE).
//
// Its zero value has taken no sample.
type WriteWatch struct {
	sampled   bool
	userTicks uint64        // the writer's user time at the first sample
	fuseUntil time.Duration // the grace for a queued WRITE, once the writer sleeps on FUSE
}

// Out takes one sample s of the writer, since after its last WRITE was
// answered, and reports whether the writer is out of its write(2).
func (ww *WriteWatch) Out(since time.Duration, s WriterSample) bool {
	if !ww.sampled {
		ww.sampled, ww.userTicks = true, s.UserTicks
	}
	switch {
	case s.Syscall == SyscallOutside:
		return true
	case s.UserTicks >= ww.userTicks+2:
		return true
	case since < WriteGap:
		return false
	}
	switch {
	case s.State == WriterBusy, s.State == WriterOnFUSE && s.Syscall == SyscallInWrite:
		return since >= WriteGap+WriteStall
	case s.State == WriterOnFUSE:
		if ww.fuseUntil == 0 {
			ww.fuseUntil = since + WriteGap
		}
		return since >= ww.fuseUntil
	}
	return true
}
