// Package watch sees changes made in a FUSE mount's backing directory
// behind the mount's back, with fanotify or inotify on each directory the
// mount watches, and reports them to a Sink by directory and name. It is a
// package of its own because it needs of the node tree only a key for
// each directory (D: fusefs's *Node) and the directory's fd: fusefs adds
// and removes directories as the kernel looks into and forgets them, and
// turns what the Sink hears into kernel invalidations (kernelnotify). What
// goes wrong with the watching itself (a directory that cannot be watched,
// events lost) it logs.
package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// The watcher sees changes made in BACKING behind the mount's back (by the
// host, git on the host, another tool), for which fusefs queues the kernel
// invalidations they need (kernelnotify), so that the kernel may cache
// names, attributes and listings for long. Changes made through the mount
// need none: the kernel made them itself.
//
// Every directory the kernel has looked into is watched, from the moment
// its node opens its fd (fusefs's Node.dirFd) until the node is forgotten:
//
//   - fanotify, where the daemon may use it (CAP_SYS_ADMIN), with a mark on
//     each directory reporting the directory's file handle and the name of
//     the child (FAN_REPORT_DFID_NAME). Events carry the pid of the process
//     that caused them, so the daemon's own changes are skipped, its
//     temps' too. (An ignore mask on each temp, taken off before the temp
//     became the file, kept them out of the queue until 2026-12-07: the
//     inode marks it left cost every later change of the file more than
//     the wakes they spared; docs/PERFORMANCE.md.)
//   - inotify otherwise, one watch per directory through /proc/self/fd/N.
//     The daemon's own changes come back too (names of temps are skipped);
//     invalidating them costs a lookup, never correctness.
//
// A lost event (the queue overflowed) forgets everything.

// fanMask is what fanotify reports on a watched directory and its children.
const fanMask = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO |
	unix.FAN_MODIFY | unix.FAN_ATTRIB | unix.FAN_CLOSE_WRITE | unix.FAN_EVENT_ON_CHILD | unix.FAN_ONDIR

// inMask is the inotify equivalent.
const inMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_EXCL_UNLINK

// The events that change a child's attributes or content, and those that
// change names; one event may carry both (the kernel merges them).
const (
	fanChildChange = unix.FAN_MODIFY | unix.FAN_ATTRIB | unix.FAN_CLOSE_WRITE
	inChildChange  = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE
	fanNameChange  = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO
	inNameChange   = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
)

// maxEventLen bounds one event as read from either queue: fanotify's
// metadata with two DFID_NAME records (a rename's old and new names, each
// a file handle of at most MAX_HANDLE_SZ bytes and a name of at most
// NAME_MAX), or inotify's header and name. A read that left at least this
// much of the buffer unused took every event queued.
const maxEventLen = 24 + 2*(4+8+8+128+256) + 64

// Sink hears what the watcher saw, from the watcher's goroutine.
type Sink[D comparable] interface {
	// Changed: name in directory dir changed in BACKING, by a process
	// other than the daemon: names, a change of names (made, removed,
	// renamed: name may now lead elsewhere, or nowhere); content, of the
	// child's content or attributes. An empty name is dir itself.
	Changed(dir D, name string, names, content bool)
	// Lost: events were lost (the kernel's queue overflowed, or an event
	// could not be read) or the watcher stopped on an error (logged); any
	// change may have gone unreported, and the sink forgets everything.
	Lost()
}

// Watcher watches directories, each known by its key D, and reports their
// changes to its Sink until Close.
type Watcher[D comparable] struct {
	sink   Sink[D]
	logf   func(format string, args ...any)
	fan    bool // fanotify; inotify otherwise
	fd     int
	stopFd int // eventfd that ends run
	self   int32

	mu    lockorder.Mutex[lockorder.WatcherMu]
	dirs  map[string]D // fanotify: directory handle → directory
	wds   map[int]D    // inotify: watch descriptor → directory
	watch map[D]watchID
	// failed counts directories that could not be watched, beyond the
	// root.
	failed atomic.Int64
	done   chan struct{}
}

// watchID is how a node's directory is watched.
type watchID struct {
	handle string
	wd     int
}

// New starts watching root, whose fd is rootFd, with fanotify if it can,
// inotify otherwise, and reports to sink; logf gets the daemon's log lines
// of what goes wrong with the watching.
func New[D comparable](root D, rootFd int, sink Sink[D], logf func(format string, args ...any)) (*Watcher[D], error) {
	return start(root, rootFd, sink, logf, true)
}

// start is New, trying fanotify only if tryFan (tests: inotify).
func start[D comparable](root D, rootFd int, sink Sink[D], logf func(format string, args ...any), tryFan bool) (*Watcher[D], error) {
	w := &Watcher[D]{sink: sink, logf: logf, self: int32(os.Getpid()), dirs: make(map[string]D),
		wds: make(map[int]D), watch: make(map[D]watchID), done: make(chan struct{})}
	// fanotify, if it can mark the root: the daemon may use it and the
	// filesystem reports file handles for its directories.
	fd, err := -1, error(unix.ENOSYS)
	if tryFan {
		fd, err = unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY|unix.O_CLOEXEC)
	}
	if err == nil {
		w.fan, w.fd = true, fd
		if err = w.add(root, rootFd); err != nil {
			unix.Close(fd)
			w.fan = false
		}
	}
	if !w.fan {
		fd, err = unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("watch BACKING: neither fanotify nor inotify: %w", err)
		}
		w.fd = fd
		if err := w.add(root, rootFd); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("watch BACKING: %w", err)
		}
	}
	w.stopFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(w.fd)
		return nil, fmt.Errorf("watch BACKING: %w", err)
	}
	go w.run()
	return w, nil
}

// Kind names the mechanism, for the daemon's log: "fanotify" or
// "inotify".
func (w *Watcher[D]) Kind() string {
	if w.fan {
		return "fanotify"
	}
	return "inotify"
}

// Fanotify reports whether the watcher uses fanotify, whose Remove needs
// the directory's fd.
func (w *Watcher[D]) Fanotify() bool { return w.fan }

// Add watches directory dir, whose verified fd is fd, and reports whether
// it does. The first directory that cannot be watched (the root apart) is
// logged by its path, which where gives: it keeps the short cache
// timeouts.
func (w *Watcher[D]) Add(dir D, fd int, where func() string) bool {
	err := w.add(dir, fd)
	if err == nil {
		return true
	}
	if w.failed.Add(1) == 1 {
		w.logf("watch %q: %v; changes made in BACKING behind the mount show there after the short cache timeouts", where(), err)
	}
	return false
}

// add watches directory dir, whose verified fd is fd.
func (w *Watcher[D]) add(dir D, fd int) error {
	var id watchID
	var err error
	if w.fan {
		id.handle, err = dirfd.Handle(fd)
		if err == nil {
			err = dirfd.FanotifyMark(w.fd, fd, fanMask, false)
		}
	} else {
		id.wd, err = dirfd.InotifyWatch(w.fd, fd, inMask)
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fan {
		w.dirs[id.handle] = dir
	} else {
		w.wds[id.wd] = dir
	}
	w.watch[dir] = id
	return nil
}

// Remove stops watching a forgotten directory, whose fd is still fd (-1
// if it has none open: with fanotify, its mark then stays until the
// directory's inode goes).
func (w *Watcher[D]) Remove(dir D, fd int) {
	w.mu.Lock()
	id, ok := w.watch[dir]
	if !ok {
		w.mu.Unlock()
		return
	}
	delete(w.watch, dir)
	if w.fan {
		if w.dirs[id.handle] == dir {
			delete(w.dirs, id.handle)
		}
	} else if w.wds[id.wd] == dir {
		delete(w.wds, id.wd)
	}
	w.mu.Unlock()
	if w.fan {
		if fd >= 0 {
			dirfd.FanotifyMark(w.fd, fd, fanMask, true) // the mark would pin the inode
		}
	} else {
		unix.InotifyRmWatch(w.fd, uint32(id.wd))
	}
}

// lost tells the sink that events were lost, or that the watcher stops on
// err (logged).
func (w *Watcher[D]) lost(err error) {
	if err != nil {
		w.logf("watch BACKING: %v; forgetting everything the kernel cached", err)
	}
	w.sink.Lost()
}

func (w *Watcher[D]) byHandle(h string) (D, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.dirs[h]
	return d, ok
}

func (w *Watcher[D]) byWd(wd int) (D, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.wds[wd]
	return d, ok
}

// Close stops the watcher.
func (w *Watcher[D]) Close() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(w.stopFd, one[:])
	<-w.done
	unix.Close(w.fd)
	unix.Close(w.stopFd)
}

// ownPause is how long the watcher lets events gather after a wake that
// brought only the daemon's own (fanotify): a busy daemon's every create,
// write and rename is an event of its own, and a wake for each was five
// wakes and ten task switches a created file (docs/PERFORMANCE.md). At 2
// ms an editor's saves (one a millisecond) still woke it at every other
// save, and its wakes took the CPU from the requests' threads: 10 ms cut
// the daemon's samples a save by 7 %. A change from another process waits
// at most this long during such a burst, and not at all otherwise: the
// watcher that heard one, or nothing, waits in poll.
const ownPause = 10 // milliseconds

// run reads events until close.
func (w *Watcher[D]) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.stopFd), Events: unix.POLLIN}}
	stop := fds[1:]
	for {
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			w.lost(fmt.Errorf("poll: %w", err))
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		others, ok := w.drain(buf)
		if !ok {
			return
		}
		if w.fan && !others {
			// The pause is a poll of the stop fd alone: Close ends it.
			if n, _ := unix.Poll(stop, ownPause); n > 0 {
				return
			}
		}
	}
}

// drain reads the events queued and hands them on. others: fanotify
// brought one of another process's; ok false: the watcher stops (an
// error, logged).
func (w *Watcher[D]) drain(buf []byte) (others, ok bool) {
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			break
		}
		if err != nil || n <= 0 {
			w.lost(fmt.Errorf("read: %v", err))
			return others, false
		}
		if w.fan {
			others = w.fanEvents(buf[:n]) || others
		} else {
			w.inEvents(buf[:n])
		}
		if n <= len(buf)-maxEventLen {
			// The read took every event queued: another would only
			// say EAGAIN. Most wakes carry one or two events (most of
			// them the daemon's own), so this is one system call in
			// three; poll answers at once if more came meanwhile.
			break
		}
	}
	return others, true
}

// fanEvents handles a buffer of fanotify events with DFID_NAME records;
// others: one came from another process than the daemon (or the queue
// overflowed).
func (w *Watcher[D]) fanEvents(b []byte) (others bool) {
	const metaLen = 24 // struct fanotify_event_metadata
	for len(b) >= metaLen {
		evLen := int(binary.NativeEndian.Uint32(b[0:4]))
		if evLen < metaLen || evLen > len(b) || b[4] != unix.FANOTIFY_METADATA_VERSION {
			w.lost(nil)
			return true
		}
		ev := b[:evLen]
		b = b[evLen:]
		mask := binary.NativeEndian.Uint64(ev[8:16])
		pid := int32(binary.NativeEndian.Uint32(ev[20:24]))
		if mask&unix.FAN_Q_OVERFLOW != 0 {
			w.lost(nil)
			continue
		}
		if pid == w.self {
			continue // the daemon's own change: the kernel made it through the mount
		}
		others = true
		metaSize := int(binary.NativeEndian.Uint16(ev[6:8]))
		for info := ev[min(metaSize, len(ev)):]; len(info) >= 4; {
			typ := info[0]
			l := int(binary.NativeEndian.Uint16(info[2:4]))
			if l < 4 || l > len(info) {
				break
			}
			rec := info[4:l]
			info = info[l:]
			if typ != unix.FAN_EVENT_INFO_TYPE_DFID_NAME && typ != unix.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME &&
				typ != unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME && typ != unix.FAN_EVENT_INFO_TYPE_DFID {
				continue
			}
			// __kernel_fsid_t, then struct file_handle, then for the
			// _NAME kinds a NUL-terminated name.
			if len(rec) < 16 {
				continue
			}
			fsid := [2]int32{int32(binary.NativeEndian.Uint32(rec[0:4])), int32(binary.NativeEndian.Uint32(rec[4:8]))}
			hlen := int(binary.NativeEndian.Uint32(rec[8:12]))
			htype := int32(binary.NativeEndian.Uint32(rec[12:16]))
			if 16+hlen > len(rec) {
				continue
			}
			dir, ok := w.byHandle(dirfd.HandleKey(fsid, htype, rec[16:16+hlen]))
			if !ok {
				continue
			}
			name := ""
			if typ != unix.FAN_EVENT_INFO_TYPE_DFID {
				name = cString(rec[16+hlen:])
			}
			w.sink.Changed(dir, name, mask&fanNameChange != 0, mask&fanChildChange != 0)
		}
	}
	return others
}

// inEvents handles a buffer of inotify events.
func (w *Watcher[D]) inEvents(b []byte) {
	const hdr = unix.SizeofInotifyEvent
	for len(b) >= hdr {
		wd := int(int32(binary.NativeEndian.Uint32(b[0:4])))
		mask := binary.NativeEndian.Uint32(b[4:8])
		nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
		if hdr+nameLen > len(b) {
			w.lost(nil)
			return
		}
		name := cString(b[hdr : hdr+nameLen])
		b = b[hdr+nameLen:]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.lost(nil)
			continue
		case mask&unix.IN_IGNORED != 0:
			w.mu.Lock()
			if dir, ok := w.wds[wd]; ok {
				delete(w.wds, wd)
				delete(w.watch, dir)
			}
			w.mu.Unlock()
			continue
		}
		if dir, ok := w.byWd(wd); ok && name != "" {
			w.sink.Changed(dir, name, mask&inNameChange != 0, mask&inChildChange != 0)
		}
	}
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
