package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/readhold"
)

// readHolds is a handle's readhold.Holds, under the names the read
// handles call it by: a read answered with the fd holds it open until
// go-fuse has sent the reply, and Release closes it after the last.
type readHolds struct{ readhold.Holds }

func (r *readHolds) read(fd int, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return r.Read(fd, buf, off)
}

func (r *readHolds) close(fd int) error { return r.Close(fd) }

// bytesRead answers a read with bytes the daemon has (readhold.Bytes).
func bytesRead(b []byte) fuse.ReadResult { return readhold.Bytes(b) }
