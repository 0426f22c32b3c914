package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/locks"
)

// Descriptors per owner. Every open file and directory handle on the mount
// holds at least one descriptor in the daemon, and the daemon has a fixed
// number of them (RLIMIT_NOFILE): one owner holding files open by the
// thousand would leave every other owner EMFILE. So an owner may hold at
// most Options.MaxFdsPerOwner handles at once (realmfs: half the limit);
// the open past it is EMFILE, audited RESOURCE_LIMIT once per burst (the
// first refusal after the owner was last below its bound).
//
// The count is kept between the kernel and the node tree (countingFS, on a
// mount made by FS.Mount): an answered OPEN, CREATE or OPENDIR counts one
// for the caller's owner, its RELEASE (which always comes, even when the
// kernel failed the open after the daemon answered) uncounts it. The bound
// is checked by the ops themselves (Node.Open, Node.Create,
// Node.OpendirHandle call FS.admitOpen), where the refusal knows its path.
// Opens of one owner in flight together may pass the check before any is
// counted, so an owner may overshoot by the requests in flight at once.
//
// Each check resolves the caller's owner (locks.Resolver: a cached answer
// per thread, one ppoll of its pidfd; before Linux 6.9 a read of
// /proc/TID/stat), which a plain read open did not do before. The count
// after the answer takes the owner the check resolved for the same thread
// (a thread has one open in flight), so an open resolves its owner once.

// fdCounts is the count of open handles per owner.
type fdCounts struct {
	mu   sync.Mutex
	held map[locks.Owner]int
	// over: owners refused since they were last below the bound (their
	// burst's audit line is written).
	over map[locks.Owner]bool
	// owners of the handles counted, by the kernel's file handle number.
	owners map[fhKey]locks.Owner
	// checked: the owner admitOpen resolved for a calling thread, for the
	// count of the open once answered (countingFS.count).
	checked map[uint32]locks.Owner
}

// fhKey names a handle: file and directory handles are numbered apart.
type fhKey struct {
	dir bool
	fh  uint64
}

// admitOpen refuses an open of name in n (n itself when name is "") by a
// caller whose owner o holds its bound of handles already; o "" resolves
// the caller's owner here (a resolution polls the caller's pidfd: a
// request that needs the owner again passes the one it has).
func (f *FS) admitOpen(ctx context.Context, o locks.Owner, op string, n *Node, name string) syscall.Errno {
	limit := f.opts.MaxFdsPerOwner
	if limit <= 0 {
		return 0
	}
	if o == "" {
		o = f.owner(ctx)
	}
	c := &f.fds
	c.mu.Lock()
	if c.checked == nil {
		c.checked = make(map[uint32]locks.Owner)
	}
	c.checked[caller(ctx).Pid] = o
	if c.held[o] < limit {
		c.mu.Unlock()
		return 0
	}
	first := !c.over[o]
	if first {
		if c.over == nil {
			c.over = make(map[locks.Owner]bool)
		}
		c.over[o] = true
	}
	c.mu.Unlock()
	if !first {
		return errcode.ResourceLimit.Errno()
	}
	return f.refuse(ctx, op, n, name, errcode.ResourceLimit, RuleResourceLimit)
}

// checkedOwner takes the owner admitOpen resolved for thread tid, if it
// did.
func (c *fdCounts) checkedOwner(tid uint32) (locks.Owner, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.checked[tid]
	delete(c.checked, tid)
	return o, ok
}

// opened counts handle k, just given to a process of owner o.
func (c *fdCounts) opened(k fhKey, o locks.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = make(map[locks.Owner]int)
		c.owners = make(map[fhKey]locks.Owner)
	}
	c.held[o]++
	c.owners[k] = o
}

// released uncounts handle k; its owner's next refusal is a new burst
// once the owner is below limit again.
func (c *fdCounts) released(k fhKey, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[k]
	if !ok {
		return
	}
	delete(c.owners, k)
	if c.held[o]--; c.held[o] <= 0 {
		delete(c.held, o)
	}
	if c.held[o] < limit {
		delete(c.over, o)
	}
}

// countingFS is the mount's raw filesystem: go-fuse's node bridge, with
// the handles it gives out counted per owner.
type countingFS struct {
	fuse.RawFileSystem
	f *FS
}

// count counts handle k if the open that made it succeeded (st), for the
// owner the open's check resolved.
func (c *countingFS) count(in *fuse.InHeader, st fuse.Status, k fhKey) {
	if c.f.opts.MaxFdsPerOwner <= 0 {
		return
	}
	o, ok := c.f.fds.checkedOwner(in.Caller.Pid)
	if st != fuse.OK {
		return
	}
	if !ok {
		o = c.f.owner(&fuse.Context{Caller: in.Caller})
	}
	c.f.fds.opened(k, o)
}

func (c *countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := c.RawFileSystem.Open(cancel, in, out)
	c.count(&in.InHeader, st, fhKey{fh: out.Fh})
	return st
}

func (c *countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := c.RawFileSystem.Create(cancel, in, name, out)
	c.count(&in.InHeader, st, fhKey{fh: out.Fh})
	return st
}

func (c *countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := c.RawFileSystem.OpenDir(cancel, in, out)
	c.count(&in.InHeader, st, fhKey{dir: true, fh: out.Fh})
	return st
}

func (c *countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.f.fds.released(fhKey{fh: in.Fh}, c.f.opts.MaxFdsPerOwner)
	c.RawFileSystem.Release(cancel, in)
}

func (c *countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.f.fds.released(fhKey{dir: true, fh: in.Fh}, c.f.opts.MaxFdsPerOwner)
	c.RawFileSystem.ReleaseDir(in)
}

// Mount mounts the filesystem at dir, as fs.Mount does, with the handles
// of each owner counted (Options.MaxFdsPerOwner) and the umask of each
// request that makes an object noted (umaskFS), and returns once the mount
// is ready.
//
// Ready is when NewServer returns: on Linux it mounts and answers the
// kernel's INIT before it does. The daemon does not call go-fuse's
// WaitMount, whose "poll hack" opens and closes a file on the mount from a
// daemon thread: killed while that thread waits for its own answer, the
// daemon could not die (the thread holds the descriptor table, and so the
// FUSE device, open; the kernel never aborts the connection). The hack
// exists for a daemon that polls files on its own mount, which this one
// never touches; another process's POLL gets ENOSYS, as it would after the
// hack.
func (f *FS) Mount(dir string, opts *fs.Options) (*fuse.Server, error) {
	raw := &countingFS{RawFileSystem: umaskFS{fs.NewNodeFS(f.root, opts)}, f: f}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	return server, nil
}
