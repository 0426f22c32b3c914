package fdbudget

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/locks"
)

// CountingFS is a raw filesystem (go-fuse's node bridge, on the mount)
// with the handles it gives out counted per owner. The handles are counted
// between the kernel and the node tree: an answered OPEN, CREATE or
// OPENDIR charges the caller's owner, its RELEASE (which always comes,
// even when the kernel failed the open after the daemon answered)
// releases. The bound is checked by the ops themselves, before they open
// (fusefs/admit's Gate.AdmitOpen, which notes the owner it resolved: Checked),
// where a refusal knows its path. Opens of one owner in flight together
// may pass the check before any is counted, so an owner may overshoot by
// the requests in flight at once (the reserve's slack covers them).
type CountingFS struct {
	fuse.RawFileSystem
	Counts *Counts
	// Owner resolves the owner of the process a request came from, where
	// no check noted it.
	Owner func(context.Context) locks.Owner
}

// count counts handle k if the open that made it succeeded (st), for the
// owner the open's check resolved.
func (c *CountingFS) count(in *fuse.InHeader, st fuse.Status, k Handle) {
	if !c.Counts.Bounded() {
		return
	}
	o, ok := c.Counts.checkedOwner(in.Caller.Pid)
	if st != fuse.OK {
		return
	}
	if !ok {
		o = c.Owner(&fuse.Context{Caller: in.Caller})
	}
	c.Counts.Opened(k, o)
}

func (c *CountingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := c.RawFileSystem.Open(cancel, in, out)
	c.count(&in.InHeader, st, Handle{Fh: out.Fh})
	return st
}

func (c *CountingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := c.RawFileSystem.Create(cancel, in, name, out)
	c.count(&in.InHeader, st, Handle{Fh: out.Fh})
	return st
}

func (c *CountingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := c.RawFileSystem.OpenDir(cancel, in, out)
	c.count(&in.InHeader, st, Handle{Dir: true, Fh: out.Fh})
	return st
}

func (c *CountingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.Counts.Released(Handle{Fh: in.Fh})
	c.RawFileSystem.Release(cancel, in)
}

func (c *CountingFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.Counts.Released(Handle{Dir: true, Fh: in.Fh})
	c.RawFileSystem.ReleaseDir(in)
}
