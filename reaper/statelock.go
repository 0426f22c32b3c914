package reaper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StateLock is an exclusive flock on <state dir>/lock. One realmctl owns a
// state dir at a time: reap, create and destroy hold the lock throughout,
// so none sees another's half-made session as a crash's leftovers.
type StateLock struct {
	f *os.File
}

// ErrLocked is wrapped by LockStateDir when another process kept the lock
// for the whole wait.
var ErrLocked = errors.New("state dir is locked by another realmctl")

// LockStateDir takes the state dir's lock, creating the dir if needed. If
// another process holds it, it retries for up to wait, then fails with a
// message naming the holder's pid.
//
// The state dir is trusted only if it is safe: realmctl runs as root and
// writes there (the lock's pid, records, mounts), so a dir another user owns
// or may write (REALM_STATE_DIR=/tmp/realm made first by someone else)
// could hold a planted symlink or hard link that makes realmctl truncate
// any file. So the dir, and its sessions/ and mounts/ where they exist,
// must be owned by the effective uid and not be writable by group or
// others (checkStateDir); every directory on the way to it root's or the
// effective uid's, and writable by no one else unless sticky
// (checkParents); the given path, if a symlink, must be the
// effective uid's or root's; and the lock is opened relative to the
// checked dir with O_NOFOLLOW and must be a regular file of the effective
// uid with one link.
func LockStateDir(dir string, wait time.Duration) (*StateLock, error) {
	euid := uint32(os.Geteuid())
	// Before MkdirAll, which follows the symlinks on the way; and again
	// after it, for what it made or found made meanwhile.
	if err := checkParents(dir, euid); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make state dir %s: %w", dir, err)
	}
	if err := checkParents(dir, euid); err != nil {
		return nil, err
	}
	dfd, err := openStateDir(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	name := filepath.Join(dir, "lock")
	f, err := openLock(dfd, name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if time.Now().After(deadline) {
			holder := readHolder(f)
			f.Close()
			return nil, fmt.Errorf("another realmctl (%s) has held the state dir %s for over %s; try again when it is done: %w",
				holder, dir, wait, ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pid is only for the message above; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &StateLock{f: f}, nil
}

// ErrUnsafeStateDir is wrapped by LockStateDir when the state dir, one of
// its subdirs or its lock is not safe to use (see LockStateDir).
var ErrUnsafeStateDir = errors.New("unsafe state dir")

// openStateDir opens dir (following a symlink the effective uid or root
// owns) and checks it and its sessions/ and mounts/ subdirs. The returned
// descriptor is the dir that was checked, so nothing can be swapped in
// between the check and the use.
func openStateDir(dir string) (int, error) {
	var lst unix.Stat_t
	if err := unix.Lstat(dir, &lst); err != nil {
		return -1, fmt.Errorf("state dir %s: %w", dir, err)
	}
	euid := uint32(os.Geteuid())
	if lst.Mode&unix.S_IFMT == unix.S_IFLNK && lst.Uid != euid && lst.Uid != 0 {
		return -1, unsafeDir(dir, "is a symlink owned by uid %d, not by uid %d (this realmctl) or root", lst.Uid, euid)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open state dir %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		unix.Close(dfd)
		return -1, fmt.Errorf("stat state dir %s: %w", dir, err)
	}
	if err := checkStateDir(dir, &st, euid); err != nil {
		unix.Close(dfd)
		return -1, err
	}
	for _, sub := range []string{"sessions", "mounts"} {
		if err := unix.Fstatat(dfd, sub, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			unix.Close(dfd)
			return -1, fmt.Errorf("stat %s: %w", filepath.Join(dir, sub), err)
		}
		if err := checkStateDir(filepath.Join(dir, sub), &st, euid); err != nil {
			unix.Close(dfd)
			return -1, err
		}
	}
	return dfd, nil
}

// checkStateDir refuses st (of path) unless it is a directory owned by euid
// that neither group nor others may write.
func checkStateDir(path string, st *unix.Stat_t, euid uint32) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return unsafeDir(path, "is not a directory (a symlink or another file)")
	case st.Uid != euid:
		return unsafeDir(path, "is owned by uid %d, not by uid %d (this realmctl); use a state dir of your own (--state-dir) or chown it", st.Uid, euid)
	case st.Mode&0o022 != 0:
		return unsafeDir(path, "is writable by its group or others (mode %04o); chmod go-w it", st.Mode&0o7777)
	}
	return nil
}

func unsafeDir(path, format string, args ...any) error {
	return fmt.Errorf("refusing state dir %s: %s: %w", path, fmt.Sprintf(format, args...), ErrUnsafeStateDir)
}

// openLock opens (creating it) the lock in the checked dir dfd: never
// through a symlink, and only a regular file of the effective uid with
// one link (not a hard link to a file elsewhere).
func openLock(dfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dfd, "lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("refusing lock %s: it is a symlink: %w", name, ErrUnsafeStateDir)
		}
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	var why string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		why = "it is not a regular file"
	case st.Uid != uint32(os.Geteuid()):
		why = fmt.Sprintf("it is owned by uid %d, not by uid %d (this realmctl)", st.Uid, os.Geteuid())
	case st.Nlink != 1:
		why = fmt.Sprintf("it has %d hard links", st.Nlink)
	}
	if why != "" {
		unix.Close(fd)
		return nil, fmt.Errorf("refusing lock %s: %s: %w", name, why, ErrUnsafeStateDir)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid := strings.TrimSpace(string(buf[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "pid unknown"
	}
	return "pid " + pid
}

// Unlock releases the lock. It is safe to call more than once.
func (l *StateLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
