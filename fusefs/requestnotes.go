package fusefs

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/internal/lockorder"
)

// What the kernel sends with a request that go-fuse's node API does not
// pass on: the caller's umask with CREATE, MKDIR and MKNOD (umask.go), the
// open file's flags as they are at each WRITE (fuse_write_in.flags: an
// O_APPEND that fcntl(F_SETFL) set or cleared since the open shows there).
// The mount's raw filesystem (notingFS) notes them while the node bridge
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

// requestNotes holds a value for each request in progress that carries
// one, by the request's cancel channel.
type requestNotes struct {
	mu lockorder.Mutex[lockorder.RequestNotesMu]
	m  map[<-chan struct{}]uint32
}

// hold notes v for the request with cancel channel c until the returned
// func is called.
func (t *requestNotes) hold(c <-chan struct{}, v uint32) func() {
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

// of returns the value noted for the request ctx serves; false for a call
// that did not come through notingFS (the unit tests).
func (t *requestNotes) of(ctx context.Context) (uint32, bool) {
	c, ok := ctx.(*fuse.Context)
	if !ok || c == nil || c.Cancel == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[c.Cancel]
	return v, ok
}

// notingFS notes each CREATE's, MKDIR's and MKNOD's umask (FS.umasks) and
// each WRITE's flags (FS.writeIns) while the node bridge beneath serves
// the request. go-fuse's server calls Writev first and Write when that
// answers ENOSYS.
type notingFS struct {
	fuse.RawFileSystem
	f *FS
}

func (n notingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer n.f.umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Create(cancel, in, name, out)
}

func (n notingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer n.f.umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (n notingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer n.f.umasks.hold(cancel, in.Umask&0o777)()
	return n.RawFileSystem.Mknod(cancel, in, name, out)
}

func (n notingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer n.f.writeIns.hold(cancel, in.Flags)()
	return n.RawFileSystem.Write(cancel, in, data)
}

func (n notingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer n.f.writeIns.hold(cancel, in.Flags)()
	return n.RawFileSystem.Writev(cancel, in, data)
}
