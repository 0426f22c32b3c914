// Package devthread runs the writing of FUSE notifications on an OS thread
// of its own, whose descriptor table is private and holds a clone of the
// FUSE device. It touches only /dev/fuse and /proc/thread-self, never a
// workspace.
package devthread

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An entry invalidation waits in the kernel, uninterruptibly, for the
// directory's lock; a process may hold that lock while it waits for this
// daemon. Should the daemon be killed then, its thread asleep in the
// notification keeps the process's descriptor table, and with it the FUSE
// device, open: the kernel never aborts the connection, the process holding
// the lock never gets its answer, and the daemon never finishes dying.
//
// So notifications are written on a thread of their own (Thread)
// whose descriptor table is private (unshare CLONE_FILES) and holds, under
// the device's number, a clone of the device (FUSE_DEV_IOC_CLONE: another
// descriptor of the same connection) instead of the daemon's. Killed, the
// daemon's other threads exit and close its table; closing the daemon's
// device descriptor ends every request read through it (ECONNABORTED); the
// process holding the lock lets go; the notification, then its thread,
// finishes, and closing the clone aborts the connection. What is left is a
// request the kernel queued under the lock just as the daemon died, unread:
// it waits for the clone, which waits for it. The daemon's watcher
// (cmd/realmfs: startWatcher) ends that: once the daemon's other threads
// are gone it aborts the connection, which ends the unread request too.

// fuseDevIocClone is FUSE_DEV_IOC_CLONE, _IOR(229, 0, uint32): it binds a
// fresh /dev/fuse descriptor to the connection of the one it is given.
const fuseDevIocClone = 0x8004e500

// Thread runs functions, one at a time, on its locked OS thread.
type Thread struct {
	calls chan func()
	done  chan struct{} // one per call run
}

// Start isolates a thread as above and returns it; on error no thread is
// left behind that differs from the process's. Call it once the FUSE device
// is open (mounted).
func Start() (*Thread, error) {
	t := &Thread{calls: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go t.run(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Thread) run(ready chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The process's first thread: its table is the one /proc/PID/fd
		// shows. Hold it while the work starts on another thread, then
		// give it back unchanged.
		next := make(chan error, 1)
		go t.run(next)
		err := <-next
		runtime.UnlockOSThread()
		ready <- err
		return
	}
	if err := isolateDevice(); err != nil {
		ready <- err
		return // still locked: the runtime ends the thread with the goroutine
	}
	ready <- nil
	for f := range t.calls {
		f()
		t.done <- struct{}{}
	}
}

// Do runs f on the thread and returns when f has.
func (t *Thread) Do(f func()) {
	t.calls <- f
	<-t.done
}

// Stop ends the thread (and closes its clone of the device).
func (t *Thread) Stop() { close(t.calls) }

// isolateDevice gives the calling, locked thread a private descriptor
// table in which every descriptor of the FUSE device is a clone, and closes
// there everything else but the standard descriptors and the Go runtime's
// own (its epoll and eventfd), so that the copy keeps nothing open that the
// daemon closes.
func isolateDevice() error {
	devs, err := fuseDescriptors()
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		return errors.New("no FUSE device descriptor in the daemon")
	}
	if err := unix.Unshare(unix.CLONE_FILES); err != nil {
		return fmt.Errorf("unshare(CLONE_FILES): %w", err)
	}
	clone, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/fuse: %w", err)
	}
	old := uint32(devs[0])
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(clone), fuseDevIocClone, uintptr(unsafe.Pointer(&old))); e != 0 {
		unix.Close(clone)
		return fmt.Errorf("FUSE_DEV_IOC_CLONE: %w", e)
	}
	keep := map[int]bool{0: true, 1: true, 2: true}
	for _, d := range devs {
		if err := unix.Dup3(clone, d, unix.O_CLOEXEC); err != nil {
			unix.Close(clone)
			return fmt.Errorf("dup3: %w", err)
		}
		keep[d] = true
	}
	unix.Close(clone)
	fds, err := threadDescriptors()
	if err != nil {
		return err
	}
	for fd, target := range fds {
		if keep[fd] || target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" {
			continue
		}
		unix.Close(fd)
	}
	return nil
}

// fuseDescriptors lists the calling thread's descriptors of /dev/fuse.
func fuseDescriptors() ([]int, error) {
	fds, err := threadDescriptors()
	if err != nil {
		return nil, err
	}
	var devs []int
	for fd, target := range fds {
		if target == "/dev/fuse" {
			devs = append(devs, fd)
		}
	}
	return devs, nil
}

// threadDescriptors maps the calling thread's descriptors to what they
// refer to (readlink of /proc/thread-self/fd/N). It closes what it opens
// itself, on this thread: a descriptor left to a finalizer would be closed
// on another thread, in another table.
func threadDescriptors() (map[int]string, error) {
	const dir = "/proc/thread-self/fd"
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	self := int(d.Fd())
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	fds := make(map[int]string, len(names))
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == self {
			continue
		}
		target, err := os.Readlink(dir + "/" + name)
		if err != nil {
			continue // closed meanwhile
		}
		fds[fd] = strings.TrimSpace(target)
	}
	return fds, nil
}
