package procinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// pidfdSupport is how far pidfds work on this kernel.
type pidfdSupport int

const (
	pidfdNone   pidfdSupport = iota // every lookup takes the stat path
	pidfdLeader                     // only thread-group leaders can be opened (Linux 5.3)
	pidfdThread                     // any thread can be opened (PIDFD_THREAD, Linux 6.9)
)

// probePidfd finds how far pidfds work by opening one of this process,
// which surely exists: a failure then is the kernel's, not the pid's.
// Before Linux 6.9 PIDFD_THREAD is EINVAL; before 5.3 pidfd_open is ENOSYS,
// and a seccomp filter may forbid it.
var probePidfd = sync.OnceValue(func() pidfdSupport {
	for _, p := range []struct {
		flags   int
		support pidfdSupport
	}{
		{unix.PIDFD_THREAD, pidfdThread},
		{0, pidfdLeader},
	} {
		if fd, err := unix.PidfdOpen(os.Getpid(), p.flags); err == nil {
			unix.Close(fd)
			return p.support
		}
	}
	return pidfdNone
})

// liveProc is a cached owner and a pidfd of its process that tells whether
// the process still lives. Neither field changes once it is in the cache.
type liveProc struct {
	fd    int
	owner Owner
}

// errNoPidfd tells Owner to take the stat path; it never leaves the package.
var errNoPidfd = errors.New("procinfo: no pidfd")

// errExited is the cause when the process exited before its files were
// known to be its own.
var errExited = fmt.Errorf("process exited during the lookup: %w", fs.ErrNotExist)

// pidfdOwner is Owner with a pidfd to tell a reused pid apart. It returns
// errNoPidfd if no pidfd can be had for pid.
func (r *Resolver) pidfdOwner(pid uint32) (Owner, error) {
	if o, ok := r.cached(pid); ok {
		return o, nil
	}
	// Open first, then read, then check the process still lives: alive
	// after the read, it held the pid throughout, so the files were its own.
	fd, err := r.openPidfd(pid)
	if err != nil {
		return "", errNoPidfd
	}
	r.misses.Add(1)
	o, err := r.readOwner(pid)
	if r.afterRead != nil {
		r.afterRead(pid)
	}
	if !pidfdLive(fd) {
		unix.Close(fd)
		if r.mode == OwnerPID {
			return pidOwner(uint64(pid)), nil
		}
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, errExited)
	}
	if err != nil {
		unix.Close(fd)
		if r.mode == OwnerPID {
			return pidOwner(uint64(pid)), nil
		}
		return "", fmt.Errorf("procinfo: owner of pid %d: %w", pid, err)
	}
	return r.insert(pid, fd, o), nil
}

// cached returns the cached owner of pid if its process has not exited. It
// drops the entry of one that has: the pid may be another process's now.
func (r *Resolver) cached(pid uint32) (Owner, bool) {
	r.fdMu.RLock()
	p := r.live[pid]
	live := p != nil && pidfdLive(p.fd)
	r.fdMu.RUnlock()
	if p == nil {
		return "", false
	}
	if live {
		return p.owner, true
	}
	r.fdMu.Lock()
	if r.live[pid] == p {
		r.dropLocked(pid)
	}
	r.fdMu.Unlock()
	return "", false
}

// openPidfd opens a pidfd of thread pid. Without PIDFD_THREAD it fails
// with EINVAL for a thread that leads no process, which then takes the stat
// path.
func (r *Resolver) openPidfd(pid uint32) (int, error) {
	if pid > math.MaxInt32 {
		return -1, unix.EINVAL
	}
	flags := 0
	if r.pidfd == pidfdThread {
		flags = unix.PIDFD_THREAD
	}
	return unix.PidfdOpen(int(pid), flags)
}

// readOwner reads the owner of pid from its proc files. In pid mode a status
// file without a Tgid line makes the thread its own owner, as the stat path
// does.
func (r *Resolver) readOwner(pid uint32) (Owner, error) {
	dir := r.procDir(pid)
	switch r.mode {
	case OwnerCgroup:
		return readCgroupOwner(dir)
	case OwnerSession:
		st, err := readStat(dir + "stat")
		if err != nil {
			return "", err
		}
		return sessionOwner(st.session), nil
	case OwnerPID:
		return readTgidOwner(dir, pidOwner(uint64(pid)))
	}
	return "", fmt.Errorf("unknown mode %v", r.mode)
}

// insert caches owner o of pid with its pidfd fd, which it takes over, and
// returns the owner to use: that of an entry for the same live process that
// another lookup inserted meanwhile, so the first owner resolved stays.
func (r *Resolver) insert(pid uint32, fd int, o Owner) Owner {
	r.fdMu.Lock()
	defer r.fdMu.Unlock()
	if r.closed {
		unix.Close(fd)
		return o
	}
	if old := r.live[pid]; old != nil {
		if pidfdLive(old.fd) {
			// Both pidfds are of the one process holding pid now.
			unix.Close(fd)
			return old.owner
		}
		r.dropLocked(pid)
	}
	for len(r.live) > 0 && len(r.live) >= r.max {
		r.evictLocked()
	}
	r.live[pid] = &liveProc{fd: fd, owner: o}
	return o
}

// evictLocked drops the entries of exited processes among a few arbitrary
// ones, polled in one system call, or else one of them. r.fdMu must be held
// for writing.
func (r *Resolver) evictLocked() {
	const sample = 8
	var (
		pids [sample]uint32
		fds  [sample]unix.PollFd
		n    int
	)
	for pid, p := range r.live {
		pids[n] = pid
		fds[n] = unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN}
		if n++; n == sample {
			break
		}
	}
	if n == 0 {
		return
	}
	dropped := false
	var zero unix.Timespec
	if _, err := unix.Ppoll(fds[:n], &zero, nil); err == nil {
		for i := range n {
			if fds[i].Revents != 0 {
				r.dropLocked(pids[i])
				dropped = true
			}
		}
	}
	if !dropped {
		r.dropLocked(pids[0])
	}
}

// dropLocked closes and forgets pid's entry. r.fdMu must be held for
// writing.
func (r *Resolver) dropLocked(pid uint32) {
	if p := r.live[pid]; p != nil {
		unix.Close(p.fd)
		delete(r.live, pid)
	}
}

// Close closes the pidfds and the fdinfo tables the Resolver holds. Owner
// and Descriptors still work afterwards, without caching. Close is idempotent.
func (r *Resolver) Close() error {
	r.closeTables()
	r.fdMu.Lock()
	defer r.fdMu.Unlock()
	r.closed = true
	var errs []error
	for pid, p := range r.live {
		if err := unix.Close(p.fd); err != nil {
			errs = append(errs, fmt.Errorf("procinfo: close pidfd of pid %d: %w", pid, err))
		}
		delete(r.live, pid)
	}
	return errors.Join(errs...)
}

// pidfdLive reports whether the process of pidfd fd has not exited. A pidfd
// polls readable once its thread (PIDFD_THREAD) or its whole process has
// exited; until then the pid is the process's and cannot be reused. A
// failed poll counts as exited, which costs only a fresh lookup.
func pidfdLive(fd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	var zero unix.Timespec
	for {
		n, err := unix.Ppoll(fds[:], &zero, nil)
		if err != unix.EINTR {
			return err == nil && n == 0
		}
	}
}
