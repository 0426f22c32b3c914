// Package fusefs is realm's guarded loopback filesystem: the go-fuse node
// tree and file handles that stand between every process on the mount and
// the backing directory.
//
// Every operation follows one shape: find the parent directory's fd (held by
// the parent node, opened beneath the root with no symlink followed), run
// the guard's checks, then make exactly one call into package dirfd on
// (dirfd, name), and verify what it reached against the (dev, ino) the node
// expects. No path string is ever handed to a system call, so a process
// outside the mount that swaps directories for symlinks cannot steer an
// operation out of the root, and a path longer than PATH_MAX through the
// mount works as it does on the backing filesystem.
//
// Lock order: internal/lockorder has it, as a tree of the classes of
// every mutex here and in locks and procinfo, with where no realm lock may
// be held (a kernel notification, the scan's wait, a lock-table wait) and
// which may not be held into go-fuse's tree (commitMu). make unit-lockdep
// checks it.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/callers"
	"github.com/realm-dev/realm/fusefs/dircache"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/inodes"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journaling"
	"github.com/realm-dev/realm/fusefs/kernelcache"
	"github.com/realm-dev/realm/fusefs/kernelnotify"
	"github.com/realm-dev/realm/fusefs/nameops"
	"github.com/realm-dev/realm/fusefs/reclock"
	"github.com/realm-dev/realm/fusefs/requestnotes"
	"github.com/realm-dev/realm/fusefs/templive"
	"github.com/realm-dev/realm/fusefs/unpublished"
	"github.com/realm-dev/realm/fusefs/watch"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/internal/ratelog"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/policy"
	"github.com/realm-dev/realm/procinfo"
)

// Options configure a mount's guard.
type Options struct {
	// ReadOnly refuses every change with EROFS, on top of the kernel's ro.
	ReadOnly bool
	// Passthrough lets the kernel serve reads of files opened read-only
	// straight from the backing file (FUSE passthrough), where it can.
	Passthrough bool
	// ChownToCaller gives each created object to the calling uid/gid: set it
	// when the daemon runs as root for other users (allow_other).
	ChownToCaller bool
	// Audit receives one event per refusal; nil discards them.
	Audit *audit.Auditor
	// Credentials says which paths are credentials; nil denies none.
	Credentials *policy.Matcher
	// Owners names the lock owner of a calling process; nil means each
	// process is its own owner.
	Owners *procinfo.Resolver
	// Durability says when commits of atomic writes are made durable.
	Durability Durability
	// Journal, if set, records every change made through the mount
	// (docs/JOURNAL.md): no change is made without its record. nil: none.
	// The caller opens it on BACKING and closes it after Close.
	Journal *journal.Journal
	// Room is BACKING's room for owners (fusefs/diskroom), shared with the
	// journal's records where the caller gives it; nil: one of the mount's
	// own where the daemon is root.
	Room *diskroom.Gauge
	// Cache says how long the kernel may trust what the mount told it; a
	// negative field (or a nil Cache) means the default: WatchedCache
	// while BACKING is watched, DefaultCache otherwise.
	Cache *CacheTimeouts
	// MaxFdsPerOwner bounds the descriptors the daemon holds for one lock
	// owner (its open files and directories, its writes' temps, its lock
	// fds: fusefs/admit's fds.go; EMFILE, RESOURCE_LIMIT beyond it), so
	// that one owner cannot take every descriptor the daemon has; 0 sets no
	// bound. Counted only on a mount made by FS.Mount.
	MaxFdsPerOwner int
	// FdLimit is the daemon's descriptor limit (RLIMIT_NOFILE): owners
	// together may hold it less a reserve for the daemon, each at most
	// half of what the others left (fusefs/admit's fds.go), and idle
	// directory fds are kept to an eighth of it (dircache.go). 0: no such
	// bound, and the idle directory fds to fdbudget.DirFdBound(0).
	FdLimit int
	// NoWatch turns off watching BACKING for changes made behind the
	// mount (and with it the long default cache timeouts).
	NoWatch bool
	// Logf receives the daemon's reports of what no caller can be told: a
	// commit that failed at the last release, a writer killed before its
	// close, a conflict copy kept. nil discards them.
	Logf func(format string, args ...any)
	// MadeStore, if set, is the file (outside BACKING) that keeps the set
	// of files made through the mount from one mount to the next
	// (guard.MadeSet.Load, Save): read by New, written by Close.
	MadeStore string
	// Debugf receives what the daemon did in the ordinary course that a
	// person debugging may want to follow but need not act on (a write
	// that went with its file's old name, as natively). nil discards it.
	Debugf func(format string, args ...any)
	// BeforeMkdir, for tests only, runs at the start of every mkdir (with
	// the kernel holding the parent directory's lock): a test stalls it to
	// show that a notification blocked on that lock stalls nothing else.
	BeforeMkdir func(name string)
	// FailAt, for tests only, makes a commit fail at the stages it returns
	// true for.
	FailAt func(Stage) bool
	// NotifyWhenBusy, for tests only, invalidates entries even in
	// directories with requests in progress, so that the notification
	// waits in the kernel for the directory's lock (see internal/devthread).
	NotifyWhenBusy bool
	// beforeGoFuseLock, for tests only, runs before realm takes a go-fuse
	// lock where a commit might hold a realm lock: a test checks there that
	// commitMu is free (the lock order at the top of this file).
	beforeGoFuseLock func(f *FS)
	// afterReplace, for tests only, runs after a commit's rename, before
	// it settles the lock and the nodes on the new file.
	afterReplace func()
	// onSync, for tests only, hears each fsync a commit makes: "temp" or
	// "dir".
	onSync func(what string)
}

// FS is one guarded mount's shared state.
type FS struct {
	opts       Options
	rootFd     int
	rootDev    uint64
	rootIno    uint64 // BACKING's root directory, with rootDev
	backing    string // BACKING's path as given to New: for the daemon's own records, never opened
	root       *Node
	boundary   *dirfd.Root        // is a directory node's fd still beneath the root (Node.dirFd)
	fds        fdbudget.Counts    // descriptors charged per owner (admit: fds.go)
	dirs       dircache.Cache     // directory nodes' fds, idle ones bounded (dircache.go)
	guard      guard.Guard        // credentials, protected paths and made files
	logLimit   *ratelog.Limiter   // the daemon log's lines, by kind (logf)
	room       *diskroom.Gauge    // BACKING's room for owners: the engine's writes, the mount's new objects (nameops)
	passCoord  bool               // coordinated files pass through (Node.openInPlace): not where BACKING keeps blocks for root (diskroom.KeepsReserve)
	gate       admit.Gate         // the audited admission over guard (fusefs/admit)
	writeLocks *locks.Table       // who may write which file (issue 4); not Node.recLocks
	processes  *procinfo.Resolver // pid mode: names a thread's process
	asRoot     bool               // the daemon runs as root: temps get the file's owner
	// ordersRenames: BACKING's filesystem writes a renamed file's data
	// before the rename (OrdersRenamedData), so a commit over an empty
	// file needs no fsync of its temp (writeengine: syncPlan).
	ordersRenames bool

	// commitMu orders a commit's rename and the nodes' new identity before
	// any name-based open or stat that verifies identity: such a lookup
	// sees either the old file and the old identity, or the new and new.
	commitMu lockorder.RWMutex[lockorder.CommitMu]
	// nsMu makes a name's judgement and the call that puts the name in
	// place one step against a directory rename's: every operation that
	// puts a name into a directory (create, mknod, mkdir, symlink, link,
	// rename, a commit's rename) holds it shared from its protect and
	// credential checks through its system call; a rename of a directory
	// (judged by what it holds: admit.Gate.DenyDirRename) holds it
	// exclusively from its scan through renameat2. No lock-table wait is
	// made under it.
	nsMu lockorder.RWMutex[lockorder.NsMu]
	// nsGen counts the releases of nsMu held exclusively, every one a
	// directory renamed through the mount, maybe: a directory's path read
	// while it was g is the kernel's still while it is g
	// (nameops.DirPath).
	nsGen atomic.Uint64

	// engine keeps the owners' writes in progress, their temps and the
	// files a rename is moving (writeengine, enginehost.go).
	engine *writeengine.Engine[*Node]
	// unpublished are the created files whose names are not in BACKING
	// yet (unpublished.go).
	unpublished unpublished.Table[*Node]
	// nameOps makes the changes of names, once a node has prepared the
	// name's directory (fusefs/nameops; ops.go).
	nameOps nameops.Ops[*Node]
	// scanning counts the mount-time scans in progress (ScanInBackground),
	// which Close waits for.
	scanning sync.WaitGroup
	// scanActive counts the scans not yet reported (Status).
	scanActive atomic.Int32

	// inos keeps the inode numbers the kernel knows across commits: a
	// rekeyed file's node keeps the number the kernel knows, which becomes
	// borrowed, and an object given a borrowed number gets one the mount
	// makes up (fusefs/inodes). It is told each node's inode number
	// (go-fuse's StableAttr) by the caller.
	inos inodes.Table[*Node]
	// heirs keeps the nodes' lock sets and hands a retired node's to the
	// nodes that replace it, releasing the charges of the fds they close
	// (reclock.go).
	heirs reclock.Heirs
	// umasks, writeIns: what the mount's raw filesystem noted of the
	// requests in progress (requestnotes.NotingFS, on a mount made by
	// FS.Mount): the caller's umask of each CREATE, MKDIR and MKNOD
	// (admit.Gate.NewMode), the file's flags at each WRITE
	// (writeHandle.Write). Notes.Of answers false for a call that did not
	// come through the mount (the unit tests).
	umasks, writeIns requestnotes.Notes
	callers          callers.Set // the threads that made requests (callers.FS), for TakeCallers

	// attrTimeout is how long the kernel may keep attributes (set by
	// MountOptions, before the mount); see Node.attrValid.
	attrTimeout time.Duration

	notify *kernelnotify.Notifier // invalidations for the kernel, sent by one goroutine
	watch  *watch.Watcher[*Node]  // changes in BACKING behind the mount (watch.go); nil if unwatched

	// mountDev is the device number of the mount itself (0 until
	// SetMountDevice), which tells its files apart in a closing process's
	// descriptor table (see writeengine.File.Flush).
	mountDev atomic.Uint64
	journal  journaling.Producer // the journal of changes' records (Options.Journal)
	mark     *templive.Mark      // the instance its temps are named for; nil: none (read-only)
}

// SetMountDevice tells the mount its own device number, once mounted (stat
// of the mountpoint): a closing process's descriptors of other filesystems
// with the same inode numbers then do not count as descriptors of the file.
func (f *FS) SetMountDevice(dev uint64) { f.mountDev.Store(dev) }

// New opens the backing root and returns the root node to mount.
func New(backing string, opts Options) (*FS, error) {
	fd, err := dirfd.OpenRoot(backing)
	if err != nil {
		return nil, err
	}
	defer dirfd.Close(fd)
	return NewAt(fd, backing, opts)
}

// NewAt is New of the backing root root holds (the caller keeps root), so
// that a daemon that opened BACKING once serves, journals and undoes in
// the one directory, whatever its path leads to later.
func NewAt(root int, backing string, opts Options) (*FS, error) {
	fd, err := dirfd.Dup(root)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		dirfd.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: backing, Err: err}
	}
	boundary, err := dirfd.NewRoot(fd)
	if err != nil {
		dirfd.Close(fd)
		return nil, err
	}
	fsys := &FS{opts: opts, backing: backing, rootFd: fd, rootDev: st.Dev, rootIno: st.Ino, boundary: boundary, writeLocks: locks.NewTable(), processes: procinfo.NewResolver(procinfo.OwnerPID, "/proc"), asRoot: unix.Geteuid() == 0, logLimit: ratelog.New(logBurst, logWindow)}
	fsys.room = opts.Room
	if fsys.room == nil {
		fsys.room = diskroom.ForRoot(fd, fsys.asRoot)
	}
	if opts.Passthrough {
		// A daemon that is not root writes as its user: the kernel holds
		// that user to the room itself.
		reserve, rerr := false, error(nil)
		if fsys.asRoot {
			reserve, rerr = diskroom.KeepsReserve(fd)
		}
		if rerr != nil {
			fsys.logf("coordinated files are not passed through: whether BACKING's file system keeps blocks for root is unknown: %v", rerr)
		}
		fsys.passCoord = !reserve
	}
	fsys.guard.Policy = opts.Credentials
	fsys.journal = journaling.Producer{J: opts.Journal, Audit: opts.Audit, Logf: fsys.logf, Owner: fsys.owner}
	fsys.ordersRenames = writeengine.OrdersRenamedData(fd)
	if !opts.ReadOnly {
		// Its temps named for it, so that another daemon of BACKING leaves
		// them be while it lives (fusefs/templive).
		if fsys.mark, err = templive.Claim(fd); err != nil {
			fsys.logf("temps named for no daemon (another mount of BACKING would take them for a crash's): %v", err)
		}
	}
	fsys.engine = fsys.newEngine()
	fsys.gate = admit.Gate{
		Guard: &fsys.guard, Audit: opts.Audit, ReadOnly: opts.ReadOnly, ChownToCaller: opts.ChownToCaller,
		Names:    guard.NameLocks{Table: fsys.writeLocks, CommitMu: &fsys.commitMu},
		Patience: locks.PatienceNow, Fds: &fsys.fds, Owner: fsys.owner, Umasks: &fsys.umasks,
		RootFd: fd, Boundary: boundary, Hidden: hiddenName, IsOwnTemp: fsys.engine.IsOwnTemp,
	}
	fsys.nameOps = nameops.Ops[*Node]{
		Gate: &fsys.gate, Journal: &fsys.journal, Engine: fsys.engine, Room: fsys.room,
		NsMu: &fsys.nsMu, NsGen: &fsys.nsGen, CommitMu: &fsys.commitMu,
		MadeStore: opts.MadeStore, Backing: backing, Logf: fsys.logf,
	}
	fsys.fds.SetBounds(opts.MaxFdsPerOwner, fdbudget.Pool(opts.FdLimit))
	fsys.heirs.Charges = &fsys.fds
	fsys.dirs.SetBound(fdbudget.DirFdBound(opts.FdLimit))
	fsys.dirs.OpenMountFd(fd)
	if opts.MadeStore != "" {
		if err := fsys.guard.LoadStore(opts.MadeStore); err != nil {
			fsys.logf("files made through earlier mounts are host-placed: %v", err)
		}
	}
	fsys.guard.StartScan()
	fsys.root = &Node{fsys: fsys, dev: st.Dev, ino: st.Ino, recLocks: reclock.Place{Born: locks.KeyOf(&st)}}
	// Unless NotifyWhenBusy (tests: they wait in the kernel), an entry
	// invalidation waits while its directory has a request in progress
	// that the kernel sent holding the directory's lock (Node.busy).
	fsys.notify = kernelnotify.New(fsys.root.EmbeddedInode(), func(dir *fs.Inode) bool {
		n := asNode(dir)
		return n != nil && n.busy.Load() > 0 && !opts.NotifyWhenBusy
	})
	if !opts.NoWatch {
		w, err := watch.New(fsys.root, fd, watchSink{fsys.notify}, fsys.logf)
		if err != nil {
			fsys.logf("%v; the kernel caches for the short default timeouts", err)
		} else {
			fsys.watch = w
			fsys.root.watched.Store(true)
		}
	}
	return fsys, nil
}

// IsolateNotifier moves the writing of invalidations to a thread with a
// descriptor table of its own, so that one waiting in the kernel for a
// directory's lock cannot keep a killed daemon alive (see internal/devthread).
// Call it once mounted; on error notifications are written as before.
func (f *FS) IsolateNotifier() error { return f.notify.Isolate() }

// Watching names how BACKING is watched ("fanotify", "inotify"), "" if it
// is not.
func (f *FS) Watching() string {
	if f.watch == nil {
		return ""
	}
	return f.watch.Kind()
}

// Root is the node to hand to fs.Mount.
func (f *FS) Root() *Node { return f.root }

// RootStableAttr is the root's identity, for fs.Options.RootStableAttr.
func (f *FS) RootStableAttr() *fs.StableAttr {
	return &fs.StableAttr{Mode: syscall.S_IFDIR, Ino: f.root.ino}
}

// CacheTimeouts are how long the kernel keeps names, attributes and the
// absence of names (kernelcache.Timeouts); DefaultCache and WatchedCache
// the defaults of an unwatched and a watched BACKING.
type CacheTimeouts = kernelcache.Timeouts

var (
	DefaultCache = kernelcache.Default
	WatchedCache = kernelcache.Watched
)

// CacheInEffect is the kernel cache the mount uses: the default for how
// BACKING is watched, with the Options' fields that are set.
func (f *FS) CacheInEffect() CacheTimeouts {
	return kernelcache.InEffect(f.watch != nil, f.opts.Cache)
}

// MountOptions returns the go-fuse options realm mounts with.
func (f *FS) MountOptions(mo fuse.MountOptions) *fs.Options {
	c := f.CacheInEffect()
	entry, attr, neg := c.Entry, c.Attr, c.Negative
	mo = kernelcache.Capabilities(mo, f.opts.Passthrough)
	// Attribute timeouts are the nodes' own (Node.attrValid): go-fuse
	// would turn a zero one, which a node in flux needs, into the default.
	f.attrTimeout = attr
	return &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &entry,
		NegativeTimeout: &neg,
		RootStableAttr:  f.RootStableAttr(),
		NullPermissions: true,
	}
}

// Close releases the root fd and the pidfds of the process resolver once
// the server has stopped, after the mount-time scan has finished.
func (f *FS) Close() error {
	f.scanning.Wait()
	if f.watch != nil {
		f.watch.Close()
	}
	f.notify.Close()
	f.dirs.CloseMountFd()
	var saved error
	if f.opts.MadeStore != "" {
		if saved = f.guard.SaveStore(f.opts.MadeStore, f.backing); saved != nil {
			saved = fmt.Errorf("files made through the mount are not remembered: %w", saved)
		}
	}
	var released error
	if f.mark != nil {
		released = f.mark.Release(f.rootFd)
	}
	return errors.Join(saved, released, f.processes.Close(), f.boundary.Close(), dirfd.Close(f.rootFd))
}

// ScanResult is what the mount-time scan found.
type ScanResult = guard.ScanResult

// ScanInBackground runs the mount-time scan (admit.Gate.Scan: the
// identities of credentials and protected files recorded, the temps a
// crash left removed) on a goroutine of its own and hands report its
// result. Close waits for it: a daemon unmounted at once still removes
// every temp a crash left, and the walk never meets a closed root fd.
func (f *FS) ScanInBackground(report func(ScanResult)) {
	f.scanning.Add(1)
	f.scanActive.Add(1)
	go func() {
		defer f.scanning.Done()
		res := f.gate.Scan()
		f.scanActive.Add(-1)
		report(res)
	}()
}

// logf writes one line to the daemon's log: at most logBurst of one kind
// (its format) in any span of logWindow, the next one written saying how
// many were left out (internal/ratelog).
func (f *FS) logf(format string, args ...any) {
	if f.opts.Logf == nil {
		return
	}
	if f.logLimit == nil { // an FS made by a test
		f.opts.Logf(format, args...)
		return
	}
	ok, leftOut := f.logLimit.Allow(format, time.Now())
	if !ok {
		return
	}
	if leftOut > 0 {
		format += " (and %d more like it since, not logged)"
		args = append(args, leftOut)
	}
	f.opts.Logf(format, args...)
}

// The daemon log's bound: lines of one kind a window.
const (
	logBurst  = 20
	logWindow = time.Minute
)

// debugf reports through Options.Debugf.
func (f *FS) debugf(format string, args ...any) {
	if f.opts.Debugf != nil {
		f.opts.Debugf(format, args...)
	}
}

// hiddenName reports names the mount never shows: realm's temps and the
// journal's directory (journal.DirName, in any directory: a workspace
// nested in BACKING may hold one of its own).
func hiddenName(name string) bool {
	return strings.HasPrefix(name, TempPrefix) || name == journal.DirName
}

// caller returns who made the request; the zero Caller if go-fuse did not say.
func caller(ctx context.Context) fuse.Caller {
	if c, ok := fuse.FromContext(ctx); ok && c != nil {
		return *c
	}
	return fuse.Caller{}
}

// nsLock takes nsMu, exclusively or shared, and returns its release.
func (f *FS) nsLock(exclusive bool) (unlock func()) { return f.nameOps.LockNames(exclusive) }

func isEscape(err error) bool { return errors.Is(err, dirfd.ErrEscape) }

// errOrNil is errno as an error: nil for 0.
func errOrNil(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// newEngine makes f's write engine. Its test hooks read f.opts at each use,
// so that a test may set them on a mount it has made.
func (f *FS) newEngine() *writeengine.Engine[*Node] {
	return writeengine.New[*Node](engineHost{f}, f.writeLocks, writeengine.Config{
		Durability:    f.opts.Durability,
		AsRoot:        f.asRoot,
		Room:          f.room,
		OrdersRenames: func() bool { return f.ordersRenames },
		Procs:         f.processes,
		MountDev:      f.mountDev.Load,
		FailAt:        f.opts.FailAt,
		OnSync:        &f.opts.onSync,
		AfterReplace:  &f.opts.afterReplace,
		TempPrefix:    f.mark.TempPrefix(),
	})
}

// owner names the lock owner of the calling process.
func (f *FS) owner(ctx context.Context) locks.Owner {
	c := caller(ctx)
	if f.opts.Owners == nil {
		return locks.Owner(fmt.Sprintf("pid:%d", c.Pid))
	}
	o, err := f.opts.Owners.Owner(c.Pid)
	if err != nil {
		// The process is gone already: it can own nothing lasting.
		return locks.Owner(fmt.Sprintf("gone:%d", c.Pid))
	}
	return o
}

// processOf is the process (thread group id) of the calling thread pid, read
// when the handle is opened (an open(2) holds no lock that reading its
// status would need); the thread itself if that fails.
func (f *FS) processOf(pid uint32) uint32 { return f.processes.Process(pid) }

// Mount mounts the filesystem at dir, as fs.Mount does, with each owner's
// handles counted (Options.MaxFdsPerOwner, FdLimit), each making request's
// umask, each WRITE's flags (requestnotes) and each caller (callers.FS)
// noted, and returns once the mount is ready.
//
// Ready is when NewServer returns (on Linux it answers the kernel's INIT
// first). Not go-fuse's WaitMount: its "poll hack" opens a file on the
// mount from a daemon thread, and killed while that thread waits for its
// own answer the daemon could not die. Another's POLL gets ENOSYS.
func (f *FS) Mount(dir string, opts *fs.Options) (*fuse.Server, error) {
	bridge := requestnotes.NotingFS{RawFileSystem: fs.NewNodeFS(f.root, opts), Umasks: &f.umasks, WriteIns: &f.writeIns}
	raw := &callers.FS{RawFileSystem: &fdbudget.CountingFS{RawFileSystem: bridge, Counts: &f.fds, Owner: f.owner}, Seen: &f.callers}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	return server, nil
}

// Requests is how many requests callers have made of the mount so far:
// the journal's pruner waits while it changes (cmd/realmfs).
func (f *FS) Requests() uint64 { return f.callers.Requests() }

// OnRequest: fn runs at each request a caller waits for (callers.Set.OnRequest).
func (f *FS) OnRequest(fn func()) { f.callers.OnRequest(fn) }

// TakeCallers: how many processes made requests since the last call (adaptprocs.Counters).
func (f *FS) TakeCallers() int { return f.callers.Take(procinfo.ThreadGroup) }

// Passthrough says what the kernel serves without the daemon: "off",
// "on" (read-only opens of plain files, and coordinated files), or "reads"
// where coordinated files go through the daemon because BACKING's file
// system keeps blocks for root (FS.passCoord).
func (f *FS) Passthrough() string {
	switch {
	case !f.opts.Passthrough:
		return "off"
	case f.passCoord:
		return "on"
	}
	return "reads"
}

// fillAttr fills a FUSE attribute from a backing stat: the mount's inode
// number (inodes.Number), and its links less the journal's (kept links,
// the root's hidden directories), so st_nlink reads as with no journal.
// kept says whether kept/ may hold a link of the object (fillEntry).
func (f *FS) fillAttr(a *fuse.Attr, s *unix.Stat_t, kept bool) {
	a.Ino = inodes.Number(f.rootDev, s.Dev, s.Ino)
	a.Size = uint64(s.Size)
	a.Blocks = uint64(s.Blocks)
	a.Atime, a.Atimensec = uint64(s.Atim.Sec), uint32(s.Atim.Nsec)
	a.Mtime, a.Mtimensec = uint64(s.Mtim.Sec), uint32(s.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(s.Ctim.Sec), uint32(s.Ctim.Nsec)
	a.Mode = s.Mode
	a.Nlink = uint32(s.Nlink)
	if isDir := s.Mode&unix.S_IFMT == unix.S_IFDIR; !isDir && kept {
		a.Nlink -= min(f.journal.KeptLinks(s.Dev, s.Ino), a.Nlink)
	} else if isDir && s.Dev == f.rootDev && s.Ino == f.rootIno && a.Nlink > 2 {
		a.Nlink -= min(f.hiddenDirs(), a.Nlink-2)
	}
	a.Uid, a.Gid = s.Uid, s.Gid
	a.Rdev = uint32(s.Rdev)
	a.Blksize = uint32(s.Blksize)
}

// hiddenDirs counts the directories in the root the mount does not show
// (the journal's, the daemons' marks: templive.Dir), whose ".." count in
// the root's st_nlink.
func (f *FS) hiddenDirs() uint32 {
	n := uint32(0)
	for _, name := range []string{journal.DirName, templive.Dir} {
		var st unix.Stat_t
		if dirfd.Lstat(f.rootFd, name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			n++
		}
	}
	return n
}

// fillEntry fills an entry from the stat of the name it answers for, one
// of st_nlink's links: an object of one link has none in kept/, and the
// journal is not asked (an rm -rf's lookups, docs/PERFORMANCE.md).
func (f *FS) fillEntry(out *fuse.EntryOut, st *unix.Stat_t) {
	f.fillAttr(&out.Attr, st, st.Nlink > 1)
}

// depth counts the directories between the root and n.
func (f *FS) depth(n *Node) int {
	d := 0
	lockorder.GoFuse("Inode.Parent")
	for in := n.EmbeddedInode(); in != nil && in != f.root.EmbeddedInode(); d++ {
		_, in = in.Parent()
		if in == nil {
			return -1 // detached: treat as outside
		}
	}
	return d
}

// Owners. "Owner" in this package means one thing: the locks.Owner a
// calling process writes as (its sandbox's cgroup by default), which the
// lock table, the pending writes and the audit log's "owner" share. The
// kernel's lock_owner of a record lock is a locker (reclock.go).
