package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/procinfo"
)

// Descriptors per owner, and for the whole daemon. The daemon has a fixed
// number of descriptors (RLIMIT_NOFILE, Options.FdLimit), and every
// handle on the mount holds some of them: one owner holding files open
// (or locked, or written) by the thousand would leave every other owner
// EMFILE. So every descriptor the daemon holds on an owner's behalf is
// charged to that owner, and released when closed:
//
//   - each open file or directory handle: one (its fd; a write handle's
//     slot, its fds are its write's);
//   - each write in progress (pendingWrite): pendingFds, the most it
//     holds (the file, the temp, two directory fds, an append fd);
//   - each record-lock or flock locker's OFD fd (reclock.go): one, and
//     the lock set's anchor one more, to the owner whose lock made it.
//
// An owner may take need more descriptors while (fdAdmit)
//
//	held+need <= MaxFdsPerOwner              (rule resource:max-fds)
//	held+need <= (pool - others) / 2         (rule resource:fd-budget)
//
// where others is what all other owners hold and pool is FdLimit less the
// daemon's reserve (fdReserve: its own descriptors, the lock owners'
// pidfd and fdinfo caches, the idle directory fds of dircache.go and the
// requests in flight). An owner may so take at most half of what the
// others left: k owners that each take all they may leave pool/2^k, and a
// newcomer always finds room unless some ten owners each hold their share.
// The refusal is EMFILE (ENOLCK for a lock), audited RESOURCE_LIMIT once
// per burst (the first refusal since the owner could last take one more).
//
// The handles are counted between the kernel and the node tree
// (countingFS, on a mount made by FS.Mount): an answered OPEN, CREATE or
// OPENDIR charges the caller's owner, its RELEASE (which always comes,
// even when the kernel failed the open after the daemon answered)
// releases. The bound is checked by the ops themselves (Node.Open,
// Node.Create, Node.OpendirHandle call FS.admitOpen), where the refusal
// knows its path. Opens of one owner in flight together may pass the check
// before any is counted, so an owner may overshoot by the requests in
// flight at once (the reserve's slack covers them).
//
// Each check resolves the caller's owner (procinfo.Resolver: a cached answer
// per thread, one ppoll of its pidfd; before Linux 6.9 a read of
// /proc/TID/stat), which a plain read open did not do before. The count
// after the answer takes the owner the check resolved for the same thread
// (a thread has one open in flight), so an open resolves its owner once.

// pendingFds is what a write in progress may hold: base, temp, tempDir,
// fileDir and an append fd.
const pendingFds = 5

// The daemon's reserve out of its descriptor limit, which no owner's
// charge may take (fdReserve).
const (
	// daemonFds: the mount, the root and its boundary fd, logs, the
	// watcher, the notifier's thread, /proc reads, a commit's own fds.
	daemonFds = 64
	// resolverFds: the two lock-owner resolvers (Options.Owners and the
	// pid resolver), each with its pidfd and fdinfo caches.
	resolverFds = 2 * (procinfo.DefaultCacheSize + procinfo.FdinfoCacheBound)
	// inFlightFds: descriptors requests in progress hold a moment (pinned
	// directory fds beyond the idle bound, an open's fd before its charge).
	inFlightFds = 128
)

// dirFdBound is the most idle directory fds the daemon keeps for a
// descriptor limit (dircache.go): an eighth of it, between 64 and 4096.
func dirFdBound(limit int) int {
	return min(max(limit/8, 64), 4096)
}

// fdReserve is what of limit no owner may take; at most half of it.
func fdReserve(limit int) int {
	return min(daemonFds+resolverFds+inFlightFds+dirFdBound(limit), limit/2)
}

// fdPool is what all owners together may hold under limit; 0 (no bound)
// if the limit is unknown.
func fdPool(limit int) int {
	if limit <= 0 {
		return 0
	}
	return limit - fdReserve(limit)
}

// fdAdmit says whether an owner holding held descriptors, while all owners
// hold total, may take need more under a per-owner bound perOwner and a
// pool for all owners (each 0: no bound); "" if it may, else the rule that
// refuses.
func fdAdmit(held, total, need, perOwner, pool int) string {
	if perOwner > 0 && held+need > perOwner {
		return RuleResourceLimit
	}
	if pool > 0 && held+need > (pool-(total-held))/2 {
		return RuleFdBudget
	}
	return ""
}

// fdCounts is the descriptors charged per owner.
type fdCounts struct {
	mu lockorder.Mutex[lockorder.FdCountsMu]
	// perOwner and pool are the bounds (fdAdmit); set at New.
	perOwner, pool int
	held           map[locks.Owner]int
	total          int
	// over: owners refused since they could last take one more (their
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

// bounded reports whether anything is counted.
func (c *fdCounts) bounded() bool { return c.perOwner > 0 || c.pool > 0 }

// take charges charge descriptors to o if fdAdmit lets it take need (at
// least charge); else it returns the refusing rule and whether it is the
// first refusal of o's burst.
func (c *fdCounts) take(o locks.Owner, need, charge int) (rule string, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rule = fdAdmit(c.held[o], c.total, need, c.perOwner, c.pool); rule == "" {
		c.chargeLocked(o, charge)
		return "", false
	}
	first = !c.over[o]
	if first {
		if c.over == nil {
			c.over = make(map[locks.Owner]bool)
		}
		c.over[o] = true
	}
	return rule, first
}

// charge charges n descriptors to o, admitted before (FS.admitOpen).
func (c *fdCounts) charge(o locks.Owner, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chargeLocked(o, n)
}

func (c *fdCounts) chargeLocked(o locks.Owner, n int) {
	if c.held == nil {
		c.held = make(map[locks.Owner]int)
	}
	c.held[o] += n
	c.total += n
}

// release gives n descriptors of o back; o's next refusal is a new burst
// once it could take one more.
func (c *fdCounts) release(o locks.Owner, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(o, n)
}

func (c *fdCounts) releaseLocked(o locks.Owner, n int) {
	if n <= 0 || c.held[o] <= 0 {
		return
	}
	n = min(n, c.held[o])
	c.total -= n
	if c.held[o] -= n; c.held[o] == 0 {
		delete(c.held, o)
	}
	if fdAdmit(c.held[o], c.total, 1, c.perOwner, c.pool) == "" {
		delete(c.over, o)
	}
}

// openNeed is what an open with flags may take: its handle, and a write
// in progress if it writes.
func openNeed(flags uint32) int {
	if writeFlags(flags) {
		return 1 + pendingFds
	}
	return 1
}

// admitOpen refuses an open of name in n (n itself when name is "") by a
// caller whose owner o may not take need more descriptors; o "" resolves
// the caller's owner here (a resolution polls the caller's pidfd: a
// request that needs the owner again passes the one it has). It charges
// nothing: the open's answer does (countingFS), and a write's start
// (openShared); need is what both may take.
func (f *FS) admitOpen(ctx context.Context, o locks.Owner, op string, n *Node, name string, need int) syscall.Errno {
	c := &f.fds
	if !c.bounded() {
		return 0
	}
	if o == "" {
		o = f.owner(ctx)
	}
	c.mu.Lock()
	if c.checked == nil {
		c.checked = make(map[uint32]locks.Owner)
	}
	c.checked[caller(ctx).Pid] = o
	c.mu.Unlock()
	return f.chargeOrRefuse(ctx, o, op, n, name, need, 0, syscall.EMFILE)
}

// chargeOrRefuse charges o with charge descriptors if it may take need
// (>= charge); else it refuses op with errno, audited RESOURCE_LIMIT on
// the first refusal of o's burst.
func (f *FS) chargeOrRefuse(ctx context.Context, o locks.Owner, op string, n *Node, name string, need, charge int, errno syscall.Errno) syscall.Errno {
	c := &f.fds
	rule, first := c.take(o, need, charge)
	if rule == "" {
		return 0
	}
	if !first {
		return errno
	}
	return f.refuseAs(ctx, op, n, name, errcode.ResourceLimit, errno, rule)
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

// opened charges handle k, just given to a process of owner o.
func (c *fdCounts) opened(k fhKey, o locks.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil {
		c.owners = make(map[fhKey]locks.Owner)
	}
	c.chargeLocked(o, 1)
	c.owners[k] = o
}

// released releases handle k.
func (c *fdCounts) released(k fhKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[k]
	if !ok {
		return
	}
	delete(c.owners, k)
	c.releaseLocked(o, 1)
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
	if !c.f.fds.bounded() {
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
	c.f.fds.released(fhKey{fh: in.Fh})
	c.RawFileSystem.Release(cancel, in)
}

func (c *countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.f.fds.released(fhKey{dir: true, fh: in.Fh})
	c.RawFileSystem.ReleaseDir(in)
}

// Mount mounts the filesystem at dir, as fs.Mount does, with the handles
// of each owner counted (Options.MaxFdsPerOwner, Options.FdLimit), the umask of each
// request that makes an object and the flags of each WRITE noted
// (notingFS), and returns once the mount is ready.
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
	bridge := notingFS{RawFileSystem: fs.NewNodeFS(f.root, opts), f: f}
	raw := &countingFS{RawFileSystem: bridge, f: f}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	return server, nil
}
