package procinfo

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What a writing thread is doing. The kernel splits one write(2) into WRITE
// requests of at most max_write bytes and sends a FLUSH of another thread's
// close(2) between two of them: the write holds its own reference to the
// open file and goes on after the close. A commit at that FLUSH would
// publish a part of the write, so the daemon asks what the thread that
// sent the last WRITE is doing now. Between two requests of one write(2) it
// is in the kernel, running or runnable (on a loaded machine for as long as
// the scheduler keeps it waiting), in an uninterruptible sleep (a page of
// its buffer being read in), or asleep waiting for the answer to its next
// request; a thread asleep anywhere else has returned from its write(2).
//
// /proc/TID/stat and /proc/TID/wchan take spin locks only. The third file
// read, /proc/TID/syscall, tells for certain whether a thread that is not
// on a CPU is inside a write(2) (or another call that writes a file:
// writesFile): it waits for the thread's process's
// exec_update_lock, which execve holds while it closes the close-on-exec
// descriptors. The daemon reads it only of the thread that sent a handle's
// last WRITE while another thread closes a descriptor of it: a process's
// execve has ended its other threads before it takes that lock (and a
// thread that took over the leader's id is the closer itself), so the lock
// a read waits for is another process's execve's, which does not wait for
// this close.

// WriterState is what a thread that wrote through a handle is doing.
type WriterState int

const (
	// WriterGone: the thread has exited (or is exiting): its write(2), if
	// it was in one, has ended.
	WriterGone WriterState = iota
	// WriterOnFUSE: it sleeps waiting for the answer to a FUSE request:
	// the next WRITE of its write(2) may be queued for the daemon.
	WriterOnFUSE
	// WriterBusy: it runs, waits for a CPU, or sleeps uninterruptibly
	// elsewhere: it may be between two requests of one write(2).
	WriterBusy
	// WriterIdle: it sleeps interruptibly elsewhere (a futex, a poll, a
	// pipe): it is not inside a write(2) to the mount.
	WriterIdle
	// WriterUnknown: its wait channel cannot be read (the daemon may not
	// trace it) or its state says nothing (stopped, traced).
	WriterUnknown
)

func (s WriterState) String() string {
	return [...]string{"gone", "on-fuse", "busy", "idle", "unknown"}[s]
}

// A WriterSample is what a thread that wrote through a handle is doing,
// and the user time it has run so far. A write(2) runs in the kernel from
// its first WRITE request to its last: a thread whose user time grows has
// been back in its program, out of any write(2) it was in.
type WriterSample struct {
	State WriterState
	// UserTicks is the thread's utime (field 14 of /proc/TID/stat), in
	// clock ticks (1/100 s); 0 for a thread gone or unreadable. The
	// kernel scales its tick samples to the thread's precise run time,
	// so it may grow by a tick while the thread runs in the kernel only:
	// a thread that has had no tick in system mode has all its run time
	// counted as user time.
	UserTicks uint64
	// Syscall is where /proc/TID/syscall places it, read when its state
	// leaves the question open (busy, on FUSE or unknown).
	Syscall SyscallState
}

// SyscallState is what /proc/TID/syscall tells of a thread and write(2).
type SyscallState int

const (
	// SyscallUnknown: not read, or not to be read (the daemon may not
	// trace the thread).
	SyscallUnknown SyscallState = iota
	// SyscallRunning: the thread is on a CPU: it may be anywhere.
	SyscallRunning
	// SyscallInWrite: it is stopped inside a system call that writes a
	// file (writesFile): between two requests of one, or waiting for the
	// answer to one.
	SyscallInWrite
	// SyscallOutside: it is stopped outside any of them: in another
	// system call, or in its own code. A write it sent a WRITE of before
	// has returned.
	SyscallOutside
)

func (s SyscallState) String() string {
	return [...]string{"unknown", "running", "in-write", "outside"}[s]
}

// WriterState reports what thread tid is doing (see the type).
func (r *Resolver) WriterState(tid uint32) (WriterSample, error) {
	base := r.procRoot + "/" + strconv.FormatUint(uint64(tid), 10)
	var sbuf [2048]byte
	stat, err := readSmall(base+"/stat", sbuf[:])
	if err != nil {
		if gone(err) {
			return WriterSample{State: WriterGone}, nil
		}
		return WriterSample{State: WriterUnknown}, err
	}
	var wbuf [128]byte
	wchan, err := readSmall(base+"/wchan", wbuf[:])
	if err != nil {
		if gone(err) {
			return WriterSample{State: WriterGone}, nil
		}
		return WriterSample{State: WriterUnknown}, err
	}
	st, err := writerState(stat, wchan)
	if err != nil {
		return WriterSample{State: st}, err
	}
	utime, err := statField(stat, 14)
	if err != nil {
		return WriterSample{State: WriterUnknown}, err
	}
	sample := WriterSample{State: st, UserTicks: uint64(utime)}
	if st == WriterBusy || st == WriterOnFUSE || st == WriterUnknown {
		var err error
		if sample.Syscall, err = readSyscall(base); gone(err) {
			return WriterSample{State: WriterGone}, nil
		}
	}
	return sample, nil
}

// readSyscall reads base/syscall (SyscallUnknown on an error).
func readSyscall(base string) (SyscallState, error) {
	var buf [256]byte
	b, err := readSmall(base+"/syscall", buf[:])
	if err != nil {
		return SyscallUnknown, err
	}
	return syscallState(b), nil
}

// syscallState reads a /proc/TID/syscall line: "running", or the number
// of the system call the thread is stopped in, its six arguments and its
// stack and instruction pointers, or -1 and the two pointers when it is
// in its own code. The numbers are the 64-bit ABI's: a thread of a 32-bit
// program (both pointers below 4 GiB) or of an x32 one (the number's
// x32 bit) is stopped in a call this cannot name.
func syscallState(b []byte) SyscallState {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return SyscallUnknown
	}
	if string(f[0]) == "running" {
		return SyscallRunning
	}
	nr, err := strconv.ParseInt(string(f[0]), 10, 64)
	switch {
	case err != nil:
		return SyscallUnknown
	case nr == -1:
		return SyscallOutside
	case len(f) < 3 || nr&x32Bit != 0 || below4G(f[len(f)-2]) && below4G(f[len(f)-1]):
		return SyscallUnknown
	}
	if writesFile[nr] {
		return SyscallInWrite
	}
	return SyscallOutside
}

// writesFile are the system calls in which the kernel writes a file on the
// caller's behalf, each into WRITE requests to a FUSE file: the write(2)
// family; sendfile(2) and splice(2), which move a pipe's pages into the
// file (do_splice_direct, iter_file_splice_write: a 64 MiB sendfile is a
// thousand WRITEs from inside one call); copy_file_range(2), which falls
// back on a splice where the filesystems cannot copy; io_submit(2), whose
// writes to a FUSE file without FUSE_ASYNC_DIO run inside the call; and
// io_uring_enter(2), which may issue a write inline. A thread stopped in
// any other call has left its write: so this is the list of calls that
// keep a close waiting, and a call missing from it would commit a part
// (TestCloseDuringWrite's sendfile case did, before sendfile was in it).
var writesFile = map[int64]bool{
	unix.SYS_WRITE: true, unix.SYS_WRITEV: true,
	unix.SYS_PWRITE64: true, unix.SYS_PWRITEV: true, unix.SYS_PWRITEV2: true,
	unix.SYS_SENDFILE: true, unix.SYS_SPLICE: true, unix.SYS_COPY_FILE_RANGE: true,
	unix.SYS_IO_SUBMIT: true, unix.SYS_IO_URING_ENTER: true,
}

// x32Bit marks the system call numbers of the x32 ABI (amd64's
// __X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// below4G reports whether the hexadecimal pointer p ("0x7ffc…") is below
// 4 GiB, as every pointer of a 32-bit program is.
func below4G(p []byte) bool {
	v, err := strconv.ParseUint(strings.TrimPrefix(string(p), "0x"), 16, 64)
	return err == nil && v <= math.MaxUint32
}

// gone reports whether a /proc read failed because the thread is gone.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// writerState judges a thread from its stat line and its wait channel
// (the function it sleeps in, or "0" when it runs or may not be traced).
func writerState(stat, wchan []byte) (WriterState, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return WriterUnknown, errors.New("malformed stat: no state after (comm)")
	}
	onFUSE := fuseWait(bytes.TrimSpace(wchan))
	switch stat[i+2] {
	case 'R':
		return WriterBusy, nil
	case 'D':
		if onFUSE {
			return WriterOnFUSE, nil // a killable wait for an answer
		}
		return WriterBusy, nil
	case 'S':
		switch w := bytes.TrimSpace(wchan); {
		case onFUSE:
			return WriterOnFUSE, nil
		case len(w) == 0 || string(w) == "0":
			return WriterUnknown, nil
		}
		return WriterIdle, nil
	case 'Z', 'X':
		return WriterGone, nil
	}
	return WriterUnknown, nil
}

// fuseWait reports whether a wait channel is the FUSE client's wait for an
// answer (request_wait_answer, or a fuse_ function it was inlined into).
func fuseWait(wchan []byte) bool {
	return bytes.Equal(wchan, []byte("request_wait_answer")) || bytes.HasPrefix(wchan, []byte("fuse_")) || bytes.HasPrefix(wchan, []byte("__fuse_"))
}
