package procinfo

import (
	"bytes"
	"errors"
	"io/fs"
	"strconv"

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
// Only /proc/TID/stat and /proc/TID/wchan are read: both take spin locks
// and no lock a thread inside execve holds (unlike /proc/TID/syscall, which
// waits for exec_update_lock), so a thread waiting for the daemon cannot
// stall the read.

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
	// clock ticks (1/100 s); 0 for a thread gone or unreadable.
	UserTicks uint64
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
	return WriterSample{State: st, UserTicks: uint64(utime)}, nil
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
