// Package jdir is the journal's directory as the journal opens it: made
// 0700 where it is the default one, refused where a link from BACKING
// cannot reach it (another filesystem, another mount) or where another
// user owns it (who could read the versions kept there), its .gitignore,
// its subdirectories, and its LOCK, flocked by one writer. Every call is
// on a descriptor, through fusefs/dirfd. The journal's tests drive it
// through journal.Open (modes, owners, the filesystem, the lock).
package jdir

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// The names jdir makes in the journal's directory.
const (
	Gitignore = ".gitignore"
	Lock      = "LOCK"
)

// ErrLocked: another process (or another Open) holds the journal's LOCK.
var ErrLocked = errors.New("journal: in use")

// OpenDefault opens the directory name beneath root, made 0700 if absent.
func OpenDefault(root int, name string) (int, error) { return makeOpen(root, name, name) }

// makeOpen opens the directory name in dir, made 0700 if absent; what
// names it in errors.
func makeOpen(dir int, name, what string) (int, error) {
	if err := dirfd.Mkdir(dir, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("journal: making %s: %w", what, err)
	}
	fd, err := dirfd.OpenDir(dir, name)
	if err != nil {
		return -1, fmt.Errorf("journal: opening %s: %w", what, err)
	}
	return fd, nil
}

// Narrow takes group's and others' access away from the default journal
// directory fd, named name (made by another, or chmod'ed since).
func Narrow(fd int, name string) error {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return fmt.Errorf("journal: %s: %w", name, err)
	}
	if st.Mode&0o077 == 0 {
		return nil
	}
	if err := dirfd.Chmod(fd, 0o700); err != nil {
		return fmt.Errorf("journal: %s: mode 0700: %w", name, err)
	}
	return nil
}

// SameFilesystem refuses a journal directory a link or a rename from
// BACKING cannot reach: on another filesystem (st_dev), or on another
// mount of the same one (a bind: linkat and renameat answer EXDEV across
// mounts).
func SameFilesystem(root, dir int) error {
	var rs, ds unix.Stat_t
	if err := dirfd.Fstat(root, &rs); err != nil {
		return fmt.Errorf("journal: BACKING: %w", err)
	}
	if err := dirfd.Fstat(dir, &ds); err != nil {
		return fmt.Errorf("journal: its directory: %w", err)
	}
	if ds.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("journal: its directory is not a directory")
	}
	if rs.Dev != ds.Dev {
		return fmt.Errorf("journal: its directory is on device %d:%d, BACKING on %d:%d: it must be on BACKING's filesystem, so that a change's old version is kept by a link, not a copy",
			unix.Major(ds.Dev), unix.Minor(ds.Dev), unix.Major(rs.Dev), unix.Minor(rs.Dev))
	}
	rm, rok, err := dirfd.MountID(root)
	if err != nil {
		return fmt.Errorf("journal: BACKING: %w", err)
	}
	dm, dok, err := dirfd.MountID(dir)
	if err != nil {
		return fmt.Errorf("journal: its directory: %w", err)
	}
	if rok && dok && rm != dm {
		return fmt.Errorf("journal: its directory is on mount %d, BACKING on mount %d of the same filesystem (device %d:%d): links between two mounts fail, so it must be reached through BACKING's mount",
			dm, rm, unix.Major(rs.Dev), unix.Minor(rs.Dev))
	}
	return nil
}

// Owned refuses an object of the journal that the daemon's user does not
// own: whoever owns it could read the versions kept there.
func Owned(fd int, what string) error {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return fmt.Errorf("journal: %s: %w", what, err)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("journal: %s is owned by uid %d, not by the daemon's user (uid %d)", what, st.Uid, euid)
	}
	return nil
}

// WriteGitignore makes .gitignore holding "*" where there is none, so
// that git status in BACKING stays quiet.
func WriteGitignore(dir int) error {
	fd, err := dirfd.Open(dir, Gitignore, unix.O_WRONLY|unix.O_CREAT, 0o644)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: making %s: %w", Gitignore, err)
	}
	f := os.NewFile(uintptr(fd), Gitignore)
	_, err = f.Write([]byte("*\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: writing %s: %w", Gitignore, err)
	}
	return nil
}

// TakeLock opens LOCK (made if absent) and flocks it, or says who holds
// it: the pid the holder wrote into it.
func TakeLock(dir int) (*os.File, error) {
	fd, err := dirfd.Open(dir, Lock, unix.O_RDWR, 0)
	if errors.Is(err, unix.ENOENT) {
		fd, err = dirfd.Open(dir, Lock, unix.O_RDWR|unix.O_CREAT, 0o600)
		if errors.Is(err, unix.EEXIST) { // made meanwhile
			fd, err = dirfd.Open(dir, Lock, unix.O_RDWR, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("journal: opening %s: %w", Lock, err)
	}
	f := os.NewFile(uintptr(fd), Lock)
	if err := Regular(fd, Lock); err != nil {
		f.Close()
		return nil, err
	}
	if err := dirfd.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another process"
		buf := make([]byte, 32)
		if n, _ := f.ReadAt(buf, 0); n > 0 {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s holds its %s (a mounted realmfs, or a journal command)", ErrLocked, holder, Lock)
		}
		return nil, fmt.Errorf("journal: locking %s: %w", Lock, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0) // only a hint for the next Open's error
	}
	return f, nil
}

// Regular refuses an fd that is not a regular file.
func Regular(fd int, what string) error {
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return fmt.Errorf("journal: %s: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("journal: %s is not a regular file", what)
	}
	return nil
}

// Subdir opens the directory name of the journal, made 0700 if absent.
func Subdir(dir int, name string) (int, error) {
	fd, err := makeOpen(dir, name, name+"/")
	if err != nil {
		return -1, err
	}
	if err := Owned(fd, name+"/"); err != nil {
		dirfd.Close(fd)
		return -1, err
	}
	return fd, nil
}
