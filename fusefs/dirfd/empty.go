package dirfd

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// OpenDirRead opens the directory name in dir for reading its entries
// (Empty), one open where OpenDir and ReopenDir are two.
func OpenDirRead(dir int, name string) (int, error) {
	return openName(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// OpenEmptyDir opens the directory name in dir for reading, as an rmdir
// finds it: ENOTDIR for another object (a symlink too: rmdir follows
// none), ENOTEMPTY if it has entries; st gets its stat. Another refusal
// of the open (a mount point: ErrEscape) comes back as it is.
func OpenEmptyDir(dir int, name string, st *unix.Stat_t) (int, error) {
	fd, err := OpenDirRead(dir, name)
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
	if err := CheckEmpty(fd); err != nil {
		Close(fd)
		return -1, err
	}
	return fd, nil
}

// CheckEmpty answers ENOTEMPTY for the directory open for reading as fd
// if it has entries (Empty).
func CheckEmpty(fd int) error {
	empty, err := Empty(fd)
	if err == nil && !empty {
		err = unix.ENOTEMPTY
	}
	return err
}

// Empty reports whether the directory fd (opened for reading, as
// OpenDirRead opens one) holds no entry but "." and "..", read from its
// start: a second call on one fd reads the directory again. It stops at
// the first other entry, and reads into a buffer of its own stack: an
// rmdir asks twice (journal.Remove), and most directories it asks of are
// empty.
func Empty(fd int) (bool, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return false, err
	}
	var buf [512]byte
	for {
		n, err := ignoringEINTR2(func() (int, error) { return unix.Getdents(fd, buf[:]) })
		if err != nil {
			return false, err
		}
		if n <= 0 {
			return true, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			if !dotName(b[19:reclen]) {
				return false, nil
			}
			b = b[reclen:]
		}
	}
}

// dotName: a NUL-terminated dirent name that is "." or "..".
func dotName(name []byte) bool {
	switch {
	case len(name) >= 2 && name[0] == '.' && name[1] == 0:
		return true
	case len(name) >= 3 && name[0] == '.' && name[1] == '.' && name[2] == 0:
		return true
	}
	return false
}
