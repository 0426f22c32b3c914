package writeengine

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// TempPrefix starts the names of realm's own temp files in the backing
// directory: the mount hides them, and its mount-time sweep removes those
// a crash left (all but the ones IsOwnTemp names).
const TempPrefix = ".realm-tmp-"

// FileID names one backing file over time (locks.FileID).
type FileID = locks.FileID

// Host is what the engine needs of the mount, implemented by the go-fuse
// adapter (fusefs), as one narrow interface per concern. N is the
// adapter's node: the engine keeps the node a write began on and its
// directory's, to hand back, never looks into them, and never calls into
// go-fuse itself. Every method may be called with the write's entry
// locked; those that take go-fuse's tree locks (Child, RelPath) are never
// called under LockCommit.
type Host[N comparable] interface {
	Reporter[N]
	NameLocks
	Guard[N]
	Identity[N]
	Notifier[N]
	FdCharger
	Journal
}

// Journal is the mount's journal of changes (docs/JOURNAL.md), as a
// commit records itself in it.
type Journal interface {
	// Journaling reports whether the mount keeps a journal: without one a
	// commit builds no record (no path, no stat), so that the journal
	// costs nothing while it is off.
	Journaling() bool
	// KeptLinks is how many of the links of the file (dev, ino) are the
	// journal's (kept versions), not names in the workspace: a file whose
	// other link is only a kept one is committed by rename, as without a
	// journal, not in place.
	KeptLinks(dev, ino uint64) uint32
	// JournalChange appends the intent of a change of the file at rel by
	// owner: op is journal.OpRewrite (the temp renamed over the file:
	// after, its identity; keep, an fd of the old file, linked into the
	// journal) or an in-place change (journal.OpAppend, or OpRewrite of a
	// file with several links, kept by nothing: keep is journal.NoKeep);
	// before is the file's stat. It is called before the change is made,
	// under LockNames and never under LockCommit (it may wait for an
	// fdatasync). end, called once with the change's error, appends its
	// end; nil when the mount keeps no journal. A non-zero errno refuses
	// the change: the journal could not record it (the host audited and
	// logged it).
	JournalChange(ctx context.Context, op journal.Op, owner locks.Owner, rel string, before *unix.Stat_t, after *journal.ID, keep int) (end func(error), errno syscall.Errno)
	// JournalCreate appends the intent of a create of the file at rel by
	// owner: an unpublished file published, or made real (newfile.go).
	// end, called once with the change's error and the file made, appends
	// its end; nil when the mount keeps no journal. As JournalChange
	// otherwise.
	JournalCreate(ctx context.Context, owner locks.Owner, rel string) (end func(err error, made *journal.ID), errno syscall.Errno)
}

// Reporter is the daemon's log and audit trail.
type Reporter[N comparable] interface {
	// Logf writes one line to the daemon's log; Debugf one that a person
	// debugging may follow.
	Logf(format string, args ...any)
	Debugf(format string, args ...any)
	// Audit writes one audit line (nothing if the mount audits nothing).
	Audit(ctx context.Context, op, rel string, code errcode.Code, errno syscall.Errno, cause error)
	// RelPath is the workspace path of name in directory dir, for logs
	// and audit lines. It may take go-fuse's tree locks.
	RelPath(dir N, name string) string
}

// NameLocks are the mount's locks a commit's rename takes.
type NameLocks interface {
	// LockNames takes the mount's name lock shared (fusefs FS.nsMu): a
	// commit's rename puts a name in place as a create does. LockCommit
	// takes the commit lock (FS.commitMu) exclusively: the rename, the
	// lock's move and the nodes' new identity are one step against an
	// open or stat that verifies identity by name. Each returns its
	// release. They are the mount's, not the engine's: its opens, stats
	// and renames take them too.
	LockNames() (unlock func())
	LockCommit() (unlock func())
}

// Guard is the mount's admission, asked where a write lands.
type Guard[N comparable] interface {
	// DenyCommit re-checks the protect rule on the place w is about to
	// commit to (or append in place to, after a rename moved it).
	DenyCommit(ctx context.Context, w *Write[N]) syscall.Errno
	// Conflicted answers a commit that met a change from outside the
	// mount: its audit line, and the errno (EBUSY) for the closer.
	Conflicted(ctx context.Context, dir N, name string) syscall.Errno
	// OwnMadeChange runs change, the mount's own change of the files fds
	// hold, so that a file the mount made keeps being known as its own.
	OwnMadeChange(fds []int, change func() error) error
}

// Identity is the nodes the kernel knows, rekeyed when a commit replaces
// their file.
type Identity[N comparable] interface {
	// Child is the node the kernel knows as name in dir, or the zero N.
	// It takes go-fuse's tree locks.
	Child(dir N, name string) N
	// Replaced is called under LockCommit once a commit's rename put the
	// file new (whose stat is st) in place of old: each of nodes (zero
	// ones skipped) that stood for the file keyed stoodFor now stands for
	// new, and the mount's records of old follow it.
	Replaced(nodes []N, stoodFor locks.Key, old, new FileID, st *unix.Stat_t)
	// Published is called once the unpublished file node stands for, to
	// be named name in dir, is published, made real or gone
	// (newfile.go): the mount answers for that name from BACKING again.
	// It may be called under LockCommit, and more than once.
	Published(node N, dir N, name string)
}

// Notifier queues invalidations for the kernel.
type Notifier[N comparable] interface {
	// NotifyEntry tells the kernel of a name made in dir it has not seen;
	// NotifyInode that n's attributes changed.
	NotifyEntry(dir N, name string)
	NotifyInode(n N)
}

// FdCharger is the mount's descriptor budget.
type FdCharger interface {
	// ChargeWrite charges owner for the descriptors a write in progress
	// holds, if the mount bounds them (false: it does not, and nothing is
	// to be released); ReleaseWrite gives them back.
	ChargeWrite(owner locks.Owner) bool
	ReleaseWrite(owner locks.Owner)
}

// Config is what the mount decides of its commits, and where a close
// learns what its closing thread holds. The funcs are read at each use,
// so that a test may change what they answer.
type Config struct {
	// Durability says when a commit is made durable.
	Durability Durability
	// AsRoot: the daemon runs as root, and a temp gets the file's owner.
	AsRoot bool
	// OrdersRenames reports whether BACKING's filesystem writes a renamed
	// file's data before the rename (OrdersRenamedData): a commit over an
	// empty file then needs no fsync of its temp (syncPlan).
	OrdersRenames func() bool
	// Procs reads what a close needs of the callers (/proc: the mount's
	// procinfo.Resolver). MountDev is the mount's own device number (0
	// until it is mounted), which tells its files apart in a closing
	// thread's descriptor table (File.Flush); nil is 0.
	Procs    Processes
	MountDev func() uint64
	// FailAt, for tests only, makes a commit fail at the stages it
	// returns true for; OnSync hears each fsync a commit makes ("temp",
	// "dir"); AfterReplace runs after a commit's rename, before it
	// settles the lock and the nodes on the new file. Each may be nil;
	// the last two are read at each use, so that a test may set them on
	// a mount it has made.
	FailAt       func(Stage) bool
	OnSync       *func(what string)
	AfterReplace *func()
	// Room is what BACKING's file system leaves a writer that is not
	// root, which every write the daemon makes as root for an owner takes
	// from (diskroom: root's reserve stays the host's); nil where the
	// daemon is not root and the kernel itself holds its writes to that.
	Room *diskroom.Gauge
	// TempPrefix starts the names of the temps this engine makes (a
	// templive.Mark's, which other daemons of BACKING leave alone while
	// this one lives); "" is TempPrefix alone.
	TempPrefix string
}

// Engine is a mount's write engine: the writes in progress hang on the
// lock table's entries; the engine keeps the names of its temps and the
// files a rename is moving.
type Engine[N comparable] struct {
	host  Host[N]
	table *locks.Table
	cfg   Config
	seq   atomic.Uint64 // the last Write.seq given out

	// moves marks the files a rename through the mount is moving now
	// (BeginMoves), which commits of their writes wait out (waitMoves).
	movesMu lockorder.Mutex[lockorder.MovesMu]
	moves   map[locks.Key]*move

	// temps are the names of the temp files this engine has made and not
	// yet renamed or removed; the mount-time sweep removes only the others.
	tempsMu lockorder.Mutex[lockorder.TempsMu]
	temps   map[string]bool
}

// New returns the write engine of a mount whose lock table is table.
func New[N comparable](host Host[N], table *locks.Table, cfg Config) *Engine[N] {
	return &Engine[N]{host: host, table: table, cfg: cfg}
}

// errNoRoom is the cause a refusal for want of room is audited with.
var errNoRoom = errors.New("the file system has no room left for a writer that is not root (the rest is root's reserve)")

// take takes n bytes of the room Config.Room keeps for a write by ctx's
// caller to the file at place: ENOSPC past it, audited RESOURCE_LIMIT
// once per burst of refusals.
func (g *Engine[N]) take(ctx context.Context, n int64, place func() string) syscall.Errno {
	if g.cfg.Room == nil {
		return 0
	}
	errno, first := g.cfg.Room.Take(n)
	if first {
		g.host.Audit(ctx, "write", place(), errcode.ResourceLimit, errno, errNoRoom)
	}
	return errno
}

// of returns e's write in progress, nil if none; the caller holds e's
// lock. The lock table keeps it as the entry's Value, set by Start and
// cleared by the last release: nothing else stores there.
func (g *Engine[N]) of(e *locks.Entry) *Write[N] {
	w, _ := e.Value.(*Write[N])
	return w
}

// locked returns e's write in progress, locked; the caller must unlock
// e. nil (e unlocked) if there is none.
func (g *Engine[N]) locked(e *locks.Entry) *Write[N] {
	e.Lock()
	w := g.of(e)
	if w == nil {
		e.Unlock()
	}
	return w
}

// each runs fn on every owner's write in progress on the backing file
// with key (several owners may append to it), each under its entry's
// lock, one at a time.
func (g *Engine[N]) each(key locks.Key, fn func(w *Write[N])) {
	for _, e := range g.table.Entries(key) {
		if w := g.locked(e); w != nil {
			fn(w)
			e.Unlock()
		}
	}
}

// OwnWrite returns, locked, owner o's write in progress on the file with
// key; nil if there is none. The caller must unlock w.Entry().
func (g *Engine[N]) OwnWrite(o locks.Owner, key locks.Key) *Write[N] {
	e, ok := g.table.EntryOf(key, o)
	if !ok {
		return nil
	}
	return g.locked(e)
}

// OwnChange tells the writes in progress on the file with key, if any,
// that this mount itself just changed the file's metadata (chmod, link,
// an xattr): the new ctime is not a conflicting change from outside.
// apply, if not nil, makes the same change to the temp, which becomes the
// file; one it cannot make is told at the commit (Write.xattrsLost).
func (g *Engine[N]) OwnChange(key locks.Key, apply func(temp int) error) {
	g.each(key, func(w *Write[N]) {
		if apply != nil && w.temp >= 0 {
			if err := apply(w.temp); err != nil {
				w.xattrsLost = errors.Join(w.xattrsLost, err)
			}
		}
		w.refresh()
	})
}

// Renamed tells the writes in progress on the file with key that this
// mount renamed the file to name in the directory dir (fd dfd).
func (g *Engine[N]) Renamed(key locks.Key, dir N, dfd int, name string) {
	g.each(key, func(w *Write[N]) {
		if fd, err := dirfd.Dup(dfd); err == nil {
			dirfd.Close(w.fileDir)
			w.fileDir, w.fileName, w.fileParent = fd, name, dir
			w.m.Renamed()
		}
		w.refresh()
	})
}

// Removed tells the write in progress on the file with key, if any, that
// this mount just removed the name it writes the file under (name in the
// directory dfd): an unlink, or a rename of another file over it, by the
// writer's own owner (another's is refused). As natively, the bytes go
// with the file, which that name no longer leads to
// (writeproto.Write.Removed); a commit must not take the file now under
// the name for a change from outside. A removed name other than the
// write's (another hard link) is not its business.
func (g *Engine[N]) Removed(key locks.Key, dfd int, name string) {
	g.each(key, func(w *Write[N]) {
		var a, b unix.Stat_t
		if w.fileName != name || dirfd.Fstat(w.fileDir, &a) != nil || dirfd.Fstat(dfd, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			return
		}
		w.m.Removed()
	})
}

// A rename through the mount moves a file between two of the steps of
// any commit of a write of it: its renameat2 changes the name, and only
// then does each write follow (Renamed, Removed). A commit that looked
// at the old name in between found nothing (and dropped the bytes, as
// for a file unlinked) or found the file's ctime moved by the rename, or
// another file, and kept a conflict copy (EBUSY at close) for a change
// "from outside the mount" (issue 29, defect 7). So the rename marks the
// files it moves before it renames and waits out the commits of their
// writes under way (BeginMoves; fusefs beginMove), and unmarks them once
// the writes have followed; a commit point waits while its file is marked
// (Write.waitMoves), holding no realm lock.

// move is one file's mark: how many renames move it now, and a channel
// closed when the last is done.
type move struct {
	n    int
	done chan struct{}
}

// BeginMoves marks the files with keys as moving, for a rename through
// the mount about to move them, and returns the end of the marks, which
// the caller calls once every write of them has followed the rename. The
// commits of their writes under way end first: each holds its entry's
// lock throughout, so once every entry of a marked file was free, the
// commits that come after wait for the mark (waitMoves).
func (g *Engine[N]) BeginMoves(keys []locks.Key) (end func()) {
	for _, k := range keys {
		g.markMove(k)
	}
	for _, k := range keys {
		for _, e := range g.table.Entries(k) {
			passed(e)
		}
	}
	return func() {
		for _, k := range keys {
			g.unmarkMove(k)
		}
	}
}

// passed waits until e's lock is free: whoever held it (a commit under
// way) is done.
func passed(e *locks.Entry) {
	e.Lock()
	defer e.Unlock()
}

// markMove marks the file with key as moving, once more.
func (g *Engine[N]) markMove(key locks.Key) {
	g.movesMu.Lock()
	defer g.movesMu.Unlock()
	if g.moves == nil {
		g.moves = make(map[locks.Key]*move)
	}
	m := g.moves[key]
	if m == nil {
		m = &move{done: make(chan struct{})}
		g.moves[key] = m
	}
	m.n++
}

// unmarkMove takes one mark off the file with key, waking the commits
// that wait when it was the last.
func (g *Engine[N]) unmarkMove(key locks.Key) {
	g.movesMu.Lock()
	defer g.movesMu.Unlock()
	if m := g.moves[key]; m != nil {
		if m.n--; m.n <= 0 {
			close(m.done)
			delete(g.moves, key)
		}
	}
}

// moving returns the channel closed when no rename moves the file with
// key any more; nil if none does now.
func (g *Engine[N]) moving(key locks.Key) <-chan struct{} {
	g.movesMu.Lock()
	defer g.movesMu.Unlock()
	if m := g.moves[key]; m != nil {
		return m.done
	}
	return nil
}

// waitMoves waits while a rename through the mount moves w's file
// (BeginMoves), letting w's entry's lock go meanwhile: a commit point calls
// it, holding that lock and no other realm lock, before it decides
// anything, so that its decision and its commit meet the file at its
// name after the rename, with the write following it.
func (w *Write[N]) waitMoves() {
	g := w.eng
	for {
		done := g.moving(g.table.EntryKey(w.entry))
		if done == nil {
			return
		}
		w.entry.Unlock()
		<-done
		w.entry.Lock()
	}
}

// synced tells the test hook of an fsync made (Config.OnSync).
func (g *Engine[N]) synced(what string) {
	if p := g.cfg.OnSync; p != nil && *p != nil {
		(*p)(what)
	}
}

// errInjected is the failure a FailAt hook injects.
var errInjected = errors.New("injected failure")

// failAt runs the test hook for a commit stage.
func (g *Engine[N]) failAt(s Stage) error {
	if g.cfg.FailAt != nil && g.cfg.FailAt(s) {
		return errInjected
	}
	return nil
}

// mountDev asks Config.MountDev.
func (g *Engine[N]) mountDev() uint64 {
	if g.cfg.MountDev == nil {
		return 0
	}
	return g.cfg.MountDev()
}

// ordersRenames asks Config.OrdersRenames.
func (g *Engine[N]) ordersRenames() bool {
	return g.cfg.OrdersRenames != nil && g.cfg.OrdersRenames()
}

// Describe is the workspace path of e's write in progress and whether it
// has bytes not yet committed (realmfs status); ok false if e holds none.
func (g *Engine[N]) Describe(e *locks.Entry) (path string, uncommitted, ok bool) {
	w := g.locked(e)
	if w == nil {
		return "", false, false
	}
	defer e.Unlock()
	return w.place(), w.Uncommitted(), true
}
