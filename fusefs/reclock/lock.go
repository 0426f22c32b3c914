package reclock

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Getlk answers the kernel's GETLK on a locker's fd: out is the lock that
// would conflict with lk (of type F_UNLCK if none would).
func Getlk(fd int, lk, out *fuse.FileLock) syscall.Errno {
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	if errno := Test(fd, &flk); errno != 0 {
		return errno
	}
	out.FromFlockT(&flk)
	return 0
}

// Setlk answers the kernel's SETLK, or with wait its SETLKW: a flock
// (FUSE_LK_FLOCK in flags) or a record lock as an OFD lock on a locker's
// fd, retried with backoff until ctx ends when wait is set (see retry).
func Setlk(ctx context.Context, fd int, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return Flock(ctx, fd, lk.Typ, wait)
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	return Lock(ctx, fd, flk, wait)
}

// Test reports in flk a lock that would conflict with flk on a locker's
// fd (F_OFD_GETLK); flk.Type is F_UNLCK if none would.
func Test(fd int, flk *syscall.Flock_t) syscall.Errno {
	flk.Pid = 0 // OFD locks require it
	return dirfd.Errno(syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, flk))
}

// Lock takes or releases the record lock flk as an OFD lock on a locker's
// fd; with wait set it waits for it (see retry).
func Lock(ctx context.Context, fd int, flk syscall.Flock_t, wait bool) syscall.Errno {
	flk.Pid = 0 // OFD locks require it
	return retry(ctx, wait, func() error {
		return syscall.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &flk)
	})
}

// Flock takes or releases a flock of a locker's fd for a lock type as the
// kernel sends it: shared for F_RDLCK, exclusive for F_WRLCK, none for
// F_UNLCK; EINVAL for any other. With wait set it waits (see retry).
func Flock(ctx context.Context, fd int, typ uint32, wait bool) syscall.Errno {
	op := unix.LOCK_NB
	switch typ {
	case syscall.F_RDLCK:
		op |= unix.LOCK_SH
	case syscall.F_WRLCK:
		op |= unix.LOCK_EX
	case syscall.F_UNLCK:
		op |= unix.LOCK_UN
	default:
		return syscall.EINVAL
	}
	return retry(ctx, wait, func() error { return unix.Flock(fd, op) })
}

// retry makes the non-blocking attempt try, and with wait set retries it
// with backoff while the lock is held, until ctx ends (EINTR): a blocking
// fcntl or flock could not be interrupted when the caller gives up (a
// signal, or the kernel's INTERRUPT).
func retry(ctx context.Context, wait bool, try func() error) syscall.Errno {
	delay := time.Millisecond
	for {
		err := try()
		if err == nil {
			return 0
		}
		if !wait || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EACCES) {
			return dirfd.Errno(err)
		}
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}
