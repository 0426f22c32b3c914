package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Follow goes on reading the log at path from f (open on it, read to
// its end; rest is the partial line that end held) and calls emit with
// each whole line, until stop is closed (nil: never). It waits on inotify,
// not a clock: the file's writes, and in its directory a new file at the
// name, which is how rotation shows (the daemon's own at its size bound,
// logrotate's move and SIGHUP): the old file is read to its end, then the
// new one from its start. A file truncated in place (logrotate's
// copytruncate) is read again from its start.
func Follow(f *os.File, path string, rest []byte, stop <-chan struct{}, emit func([]byte)) error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("follow: inotify: %w", err)
	}
	// Through the runtime's poller, so that closing it wakes the read.
	events := os.NewFile(uintptr(fd), "inotify")
	defer events.Close()
	if stop != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-stop:
				events.Close()
			case <-done:
			}
		}()
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		return fmt.Errorf("follow: watch %s: %w", filepath.Dir(path), err)
	}
	fl := &followed{f: f, rest: rest, emit: emit}
	defer func() { fl.f.Close() }()
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF); err != nil {
		return fmt.Errorf("follow: watch %s: %w", path, err)
	}
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		// Read what was written before the watch or since the last event.
		if err := fl.drain(); err != nil {
			return err
		}
		if err := fl.switchIfRotated(fd, path); err != nil {
			return err
		}
		if _, err := events.Read(buf); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("follow: inotify: %w", err)
		}
	}
}

// followed is the file being followed and the partial line read last.
type followed struct {
	f    *os.File
	rest []byte
	emit func([]byte)
}

// drain reads f to its end, emitting each whole line; a file shorter than
// what was read (truncated in place) is read again from its start.
func (fl *followed) drain() error {
	pos, err := fl.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if st, err := fl.f.Stat(); err == nil && st.Size() < pos {
		if _, err := fl.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		fl.rest = nil
	}
	b, err := io.ReadAll(fl.f)
	if err != nil {
		return err
	}
	fl.rest = append(fl.rest, b...)
	for {
		i := bytes.IndexByte(fl.rest, '\n')
		if i < 0 {
			return nil
		}
		fl.emit(fl.rest[:i+1])
		fl.rest = fl.rest[i+1:]
	}
}

// switchIfRotated moves to the file path names now if it is not the one
// being read (rotated away): the old one is read to its end first.
func (fl *followed) switchIfRotated(fd int, path string) error {
	var now, cur unix.Stat_t
	if unix.Stat(path, &now) != nil || unix.Fstat(int(fl.f.Fd()), &cur) != nil ||
		now.Dev == cur.Dev && now.Ino == cur.Ino {
		return nil // gone (its new file is not made yet: IN_CREATE will say), or the same
	}
	if err := fl.drain(); err != nil {
		return err
	}
	nf, err := os.Open(path)
	if err != nil {
		return nil // gone again; the next IN_CREATE says when it is back
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF); err != nil {
		nf.Close()
		return fmt.Errorf("follow: watch %s: %w", path, err)
	}
	fl.f.Close()
	fl.f, fl.rest = nf, nil
	return fl.drain()
}
