package dirfd

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// OpenDirRead opens the directory name in dir for reading its entries
// (Empty), one open where OpenDir and ReopenDir are two.
func OpenDirRead(dir int, name string) (int, error) {
	return openName(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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
