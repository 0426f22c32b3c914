package dirfd

import "golang.org/x/sys/unix"

// ignoringEINTR calls fn again for as long as it fails with EINTR, as the
// os package's helper of that name does. Go preempts goroutines with a
// signal (SIGURG), and a system call it interrupts on a filesystem that
// lets calls be interrupted (a backing dir on FUSE, NFS or CIFS) fails
// with EINTR although Go installs its handlers with SA_RESTART. A call
// that answers EINTR did nothing, so trying it again is safe; close(2) is
// the exception (the fd is gone whatever it answers) and is never retried.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// ignoringEINTR2 is ignoringEINTR for a call that also returns a value.
func ignoringEINTR2[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != unix.EINTR {
			return v, err
		}
	}
}
