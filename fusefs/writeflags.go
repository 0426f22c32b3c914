package fusefs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A write's flags. The kernel sends each WRITE with the flags of the open
// file it goes through as they are at that write (fuse_write_in.flags, the
// file's f_flags: an O_APPEND that fcntl(F_SETFL) set or cleared after the
// open shows there), but go-fuse's file API hands a handle's Write only
// its data and offset. The mount's raw filesystem (writeFlagsFS) notes
// each WRITE's flags while the node bridge beneath serves it, under the
// request's cancel channel: go-fuse gives every request in flight one of
// its own and hands it to the handle's Write as its fuse.Context's Cancel.
//
// What the flags cannot say: pwritev2's RWF_NOAPPEND clears O_APPEND for
// one write only, and the kernel sends the file's flags, not the write's
// (fs/fuse/file.c, fuse_write_flags). Such a write comes with O_APPEND
// and the caller's offset, as an append comes with the size the kernel
// last heard of, which may lag the writer's own bytes or another owner's
// appends. The two cannot be told apart, so it is taken for an append:
// reading it as a write at its offset would put a real append in the
// middle of the file.

// writeFlagNotes holds the flags of each WRITE being served, by its
// request's cancel channel.
type writeFlagNotes struct {
	mu sync.Mutex
	m  map[<-chan struct{}]uint32
}

// hold notes flags for the request with cancel channel c until the
// returned func is called.
func (t *writeFlagNotes) hold(c <-chan struct{}, flags uint32) func() {
	if c == nil {
		return func() {}
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[<-chan struct{}]uint32)
	}
	t.m[c] = flags
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.m, c)
		t.mu.Unlock()
	}
}

// of returns the flags noted for the WRITE ctx serves; false for a call
// that did not come through writeFlagsFS (the unit tests).
func (t *writeFlagNotes) of(ctx context.Context) (uint32, bool) {
	c, ok := ctx.(*fuse.Context)
	if !ok || c == nil || c.Cancel == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	flags, ok := t.m[c.Cancel]
	return flags, ok
}

// writeFlagsFS notes the flags of each WRITE for the handle's Write
// (writeFlagNotes) while the node bridge beneath serves it. go-fuse's
// server calls Writev first and Write when that answers ENOSYS.
type writeFlagsFS struct {
	fuse.RawFileSystem
	notes *writeFlagNotes
}

func (w writeFlagsFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer w.notes.hold(cancel, in.Flags)()
	return w.RawFileSystem.Write(cancel, in, data)
}

func (w writeFlagsFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer w.notes.hold(cancel, in.Flags)()
	return w.RawFileSystem.Writev(cancel, in, data)
}
