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
func LockStateDir(dir string, wait time.Duration) (*StateLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make state dir %s: %w", dir, err)
	}
	name := filepath.Join(dir, "lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
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
