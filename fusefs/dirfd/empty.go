package dirfd

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openDirRead opens the directory name in dir for reading its entries
// (empty), one open where OpenDir and ReopenDir are two.
func openDirRead(dir int, name string) (int, error) {
	return openName(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// OpenEmptyDir opens the directory name in dir for reading, as an rmdir
// finds it: ENOTDIR for another object (a symlink too: rmdir follows
// none), ENOTEMPTY if it has entries; st gets its stat. Another refusal
// of the open (a mount point: ErrEscape) comes back as it is.
func OpenEmptyDir(dir int, name string, st *unix.Stat_t) (int, error) {
	fd, err := openDirRead(dir, name)
	if errors.Is(err, ErrEscape) && Lstat(dir, name, st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, unix.ENOTDIR
	}
	if err != nil {
		return -1, err
	}
	if err := Fstat(fd, st); err != nil {
		Close(fd)
		return -1, err
	}
	if err := checkEmptyFrom(fd, false); err != nil { // fresh: at its start
		Close(fd)
		return -1, err
	}
	return fd, nil
}

// CheckEmpty answers ENOTEMPTY for the directory open for reading as fd
// (OpenEmptyDir's) if it has entries, read from its start: a second call
// on one fd reads the directory again.
func CheckEmpty(fd int) error { return checkEmptyFrom(fd, true) }

// checkEmptyFrom is CheckEmpty; rewind says fd may not be at its start
// (a fresh fd is: an rmdir's first read spares the lseek).
func checkEmptyFrom(fd int, rewind bool) error {
	ok, err := empty(fd, rewind)
	if err == nil && !ok {
		err = unix.ENOTEMPTY
	}
	return err
}

// empty reports whether the directory fd holds no entry but "." and
// "..", read from its start (rewound first with rewind). It stops at the
// first other entry, and reads into a buffer of its own stack: an rmdir
// asks twice (journal.Remove), and most directories it asks of are empty.
func empty(fd int, rewind bool) (bool, error) {
	if rewind {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			return false, err
		}
	}
	var buf [512]byte
	for {
		n, err := unix.Getdents(fd, buf[:]) // no closure (ignoringEINTR2): buf stays on the stack
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return err == nil, err
		}
		for b := buf[:n]; ; {
			_, _, name, rest, ok := nextDirent(b)
			if !ok {
				break
			}
			if !dotName(name) {
				return false, nil
			}
			b = rest
		}
	}
}
