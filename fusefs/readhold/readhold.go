// Package readhold keeps a file handle's fd open for as long as go-fuse
// may still read it for a reply, so that a read can be answered with the
// fd (spliced to the kernel) rather than with bytes. It is a package of
// its own because it needs nothing of the node tree: fusefs's read
// handles each hold a Holds beside their fd.
package readhold

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// A handle's fd outlives every read go-fuse still makes from it. Read
// answers with the fd, not the bytes, so that go-fuse splices them to the
// kernel without their passing through the daemon; but go-fuse reads the
// fd after Read returns, when it sends the reply, and Release may come in
// between (gocryptfs guards the same window with its file's fdLock). So a
// read takes a hold that its result's Done lets go of, and Release closes
// the fd only once no hold is left.
//
// go-fuse calls Done once on every result it is given with no error: after
// sending the reply (fuse/fusefd_linux.go, write: spliced, read with Bytes,
// or lost because the kernel no longer waits for it), after Bytes where
// splice is off (protocol-server.go, handleRequest), or at once if the
// status is an error. The one exception is a result of no bytes, which
// write sends as an empty reply without Done: such a read holds nothing,
// nor does a read that fails or one read into the daemon's buffer.

// Holds counts the reads of a handle's fd that go-fuse has not done with
// yet. The zero value is ready.
type Holds struct {
	mu      lockorder.Mutex[lockorder.ReadHoldsMu]
	n       int           // holds taken and not let go
	closing bool          // Release came: no new hold
	idle    chan struct{} // closed when the last hold goes, once Release waits
}

// take takes a hold, false once the fd is closing.
func (r *Holds) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return false
	}
	r.n++
	return true
}

// done lets go of a hold.
func (r *Holds) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if r.n == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
}

// Close refuses new holds, waits until the last one goes, and closes fd.
func (r *Holds) Close(fd int) error {
	r.mu.Lock()
	r.closing = true
	var idle chan struct{}
	if r.n > 0 {
		r.idle = make(chan struct{})
		idle = r.idle
	}
	r.mu.Unlock()
	if idle != nil {
		<-idle
	}
	return dirfd.Close(fd)
}

// Read is a read of fd at off: a heldRead that go-fuse splices from fd,
// or, for a read larger than a pipe holds with its header and a page
// (go-fuse's need; the kernel asks up to MaxWrite, 1 MiB, which is also the
// default pipe-max-size), read into buf: go-fuse would try the splice,
// fail, log it, and fall back to the same read.
func (r *Holds) Read(fd int, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !r.take() {
		return nil, syscall.EBADF
	}
	if len(buf) > 0 && len(buf)+spliceSlack <= splice.MaxPipeSize() {
		return &heldRead{holds: r, fd: fd, off: off, sz: len(buf)}, 0
	}
	defer r.done()
	n, err := unix.Pread(fd, buf, off)
	if err != nil {
		if errno, ok := err.(syscall.Errno); ok {
			return nil, errno
		}
		return nil, syscall.EIO
	}
	return Bytes(buf[:n]), 0
}

// spliceSlack is what go-fuse's splice needs in the pipe beside the data:
// the reply's header, and a page so that the pipe never fills.
const spliceSlack = 4096 + 4096

// Bytes answers a read with bytes the daemon has: a vector, which
// go-fuse writes to the device as it is (a plain data result would first
// be tried as a splice, through a pipe it can only fill from an fd).
func Bytes(b []byte) fuse.ReadResult {
	return fuse.ReadResultVector([][]byte{b})
}

// heldRead is go-fuse's fuse.ReadResultFd with a hold on the fd: sz bytes
// of fd at off, spliced (go-fuse splices any result with Seekable) or
// read with Bytes, the hold let go at Done.
type heldRead struct {
	holds *Holds
	fd    int
	off   int64
	sz    int
	done  atomic.Bool // Done ran: a second call lets go of nothing
}

// Size is the most the read returns; fewer bytes at the end of the file.
func (r *heldRead) Size() int { return r.sz }

// Seekable gives go-fuse's splice the fd and where to read it.
func (r *heldRead) Seekable() (fd uintptr, off int64, sz int) {
	return uintptr(r.fd), r.off, r.sz
}

// Bytes reads the bytes into buf, where go-fuse does not splice.
func (r *heldRead) Bytes(buf []byte) ([]byte, fuse.Status) {
	n, err := unix.Pread(r.fd, buf[:min(len(buf), r.sz)], r.off)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

// Done lets go of the read's hold on the fd.
func (r *heldRead) Done() {
	if r.done.CompareAndSwap(false, true) {
		r.holds.done()
	}
}
