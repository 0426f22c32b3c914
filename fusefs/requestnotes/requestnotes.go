// Package requestnotes keeps what the kernel sends with a FUSE request
// that go-fuse's node API does not pass on, for the node serving the
// request to ask (Notes.Of). It is a package of its own because it needs
// nothing of the node tree: a raw filesystem layer (NotingFS) notes each
// value by the request's cancel channel while the layer beneath serves it.
package requestnotes

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/internal/lockorder"
)

// What the kernel sends with a request that go-fuse's node API does not
// pass on: the caller's umask with CREATE, MKDIR and MKNOD (fusefs/admit's
// Gate.NewMode), the open file's flags as they are at each WRITE
// (fuse_write_in.flags: an O_APPEND that fcntl(F_SETFL) set or cleared
// since the open shows there).
// The mount's raw filesystem (NotingFS) notes them while the node bridge
// beneath serves the request, by the request's cancel channel: go-fuse
// gives every request in flight one of its own and hands it to the node as
// its fuse.Context's Cancel, so the note names that request alone.
//
// What a WRITE's flags cannot say: pwritev2's RWF_NOAPPEND clears
// O_APPEND for one write only, and the kernel sends the file's flags, not
// the write's (fs/fuse/file.c, fuse_write_flags). Such a write comes with
// O_APPEND and the caller's offset, as an append comes with the size the
// kernel last heard of, which may lag the writer's own bytes or another
// owner's appends. The two cannot be told apart, so it is taken for an
// append: reading it as a write at its offset would put a real append in
// the middle of the file.

// Notes holds a value for each request in progress that carries one, by
// the request's cancel channel. The zero value is ready.
type Notes struct {
	mu lockorder.Mutex[lockorder.RequestNotesMu]
	m  map[<-chan struct{}]uint32
}

// hold notes v for the request with cancel channel c until the returned
// func is called.
func (t *Notes) hold(c <-chan struct{}, v uint32) func() {
	if c == nil {
		return func() {}
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[<-chan struct{}]uint32)
	}
	t.m[c] = v
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.m, c)
		t.mu.Unlock()
	}
}

// Of returns the value noted for the request ctx serves; false for a call
// that did not come through NotingFS (fusefs's unit tests).
func (t *Notes) Of(ctx context.Context) (uint32, bool) {
	c, ok := ctx.(*fuse.Context)
	if !ok || c == nil || c.Cancel == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[c.Cancel]
	return v, ok
}

// NotingFS notes each CREATE's, MKDIR's and MKNOD's umask (in Umasks)
// and each WRITE's flags (in WriteIns) while the raw filesystem beneath
// (go-fuse's node bridge) serves the request. go-fuse's server calls
// Writev first and Write when that answers ENOSYS.
type NotingFS struct {
	fuse.RawFileSystem
	Umasks, WriteIns *Notes
}

func (n NotingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer n.Umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Create(cancel, in, name, out)
}

func (n NotingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer n.Umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (n NotingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer n.Umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Mknod(cancel, in, name, out)
}

func (n NotingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer n.WriteIns.hold(cancel, in.Flags)()
	return n.RawFileSystem.Write(cancel, in, data)
}

func (n NotingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer n.WriteIns.hold(cancel, in.Flags)()
	return n.RawFileSystem.Writev(cancel, in, data)
}
