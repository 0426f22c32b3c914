// Package nameops is the mount's operations on names, each from the point
// where fusefs has prepared the name's directory (fusefs's Node.prepare:
// the name admitted, its directory's fd opened beneath the root and
// verified, a name made judged by its path): a directory, fifo, socket or
// symlink made (Make), a regular file created (Create), a hard link (Link),
// a name removed (Remove), a rename (Rename, which judges its names
// itself). Each op here is the rest of it: its own checks, answered and
// audited by fusefs/admit; the journal's intent (fusefs/journaling); its
// one fusefs/dirfd call on (directory fd, name), with the files made
// through the mount restamped across it (guard.Guard.OwnChange); the
// journal's end; and what it made or moved recorded (the made set, the
// writes in progress of the write engine following their files). fusefs's
// adapters decode a request, make one call here, and answer with their
// nodes.
//
// It is generic over the adapter's node (N), which it asks only for its
// workspace path and the file it stands for (admit.Object) and hands to
// the write engine. It reaches BACKING only through dirfd, on the fds it
// is handed, and takes the mount's nsMu and commitMu where the lock order
// (internal/lockorder) says.
package nameops

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
	"github.com/realm-dev/realm/fusefs/journaling"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Node is the adapter's node as the ops use it: a place for paths and
// audit lines, and, as a link's source, the object it stands for.
type Node interface {
	comparable
	admit.Object
}

// Ops is one mount's operations on names: what they ask, and where their
// records and locks are. Set its fields before the mount serves; they are
// not changed after.
type Ops[N Node] struct {
	// Gate answers and audits the checks; its Guard keeps the made set
	// and the credentials' identities, its Names looks names up in the
	// lock table, and its Owner names a request's lock owner.
	Gate *admit.Gate
	// Journal records each change before it is made.
	Journal *journaling.Producer
	// Engine keeps the owners' writes in progress, which follow a file
	// renamed or removed through the mount.
	Engine *writeengine.Engine[N]
	// Room is BACKING's room for owners' new objects (nil: unbounded).
	Room *diskroom.Gauge
	// NsMu and CommitMu are the mount's namespace and commit locks
	// (fusefs's FS.nsMu, FS.commitMu, which say what each orders).
	NsMu     *lockorder.RWMutex[lockorder.NsMu]
	CommitMu *lockorder.RWMutex[lockorder.CommitMu]
	// NsGen counts the releases of NsMu held exclusively (LockNames):
	// what DirPath's check reads.
	NsGen *atomic.Uint64
	// MadeStore is the file that keeps the made set and the credentials'
	// identities across mounts ("": none; fusefs.Options.MadeStore), and
	// Backing BACKING's path as the store names it.
	MadeStore, Backing string
	// Logf writes a line to the daemon's log.
	Logf func(format string, args ...any)
}

// LockNames takes nsMu, exclusively or shared, and returns its release.
// Every directory renamed through the mount is renamed under the
// exclusive hold (a rename of one, an undo's step), whose release counts
// in NsGen first.
func (o *Ops[N]) LockNames(exclusive bool) (unlock func()) {
	if exclusive {
		o.NsMu.Lock()
		return func() {
			o.NsGen.Add(1)
			o.NsMu.Unlock()
		}
	}
	o.NsMu.RLock()
	return o.NsMu.RUnlock
}

// DirPath is a directory's workspace path as the check of its fd read it
// (fusefs's Node.dirFdWhere: the readlink of /proc/self/fd) before an op
// took nsMu, and NsGen as it was before that read (Ops.PathGen). While
// NsGen is the same, no directory has been renamed through the mount
// since: its rename would have counted at the release of its exclusive
// hold, and one made before the count was read is in the path read
// after it. (A rename from outside BACKING is as late to the path as to
// a readlink made under nsMu.) Known false: no path was read.
type DirPath struct {
	Rel   string
	Gen   uint64
	Known bool
}

// PathGen is NsGen now: read it before the readlink of a DirPath.
func (o *Ops[N]) PathGen() uint64 { return o.NsGen.Load() }

// dirRel is the workspace path of dir (fd pfd): p's where it is still the
// kernel's as far as the mount's renames go, else read again
// (admit.Gate.DirRel).
func (o *Ops[N]) dirRel(dir N, pfd int, p DirPath) string {
	if p.Known && o.NsGen.Load() == p.Gen {
		return p.Rel
	}
	return o.Gate.DirRel(dir, pfd)
}

// errNoRoom is the cause a name refused for want of room is audited
// with.
var errNoRoom = errors.New("the file system has no room left for an owner: its last inodes are the host's (diskroom.InodeReserve), and what an owner makes takes a block the daemon allocates as root, whose reserve is the host's")

// takeInode takes an inode and a block for an object an owner makes at
// rel (op: create, mkdir, mknod, symlink; diskroom.Gauge.TakeFile):
// ENOSPC once BACKING's free inodes are down to the host's reserve, or
// its blocks to root's, audited RESOURCE_LIMIT once per burst of
// refusals. An agent making empty files would otherwise take the last
// inodes, and every other owner's write (a temp is an inode) would fail;
// one making directories, root's blocks.
func (o *Ops[N]) takeInode(ctx context.Context, op, rel string) syscall.Errno {
	return o.takeRoom(ctx, op, rel, (*diskroom.Gauge).TakeFile)
}

// takeName takes a block for a name an owner adds without making an
// object (link; diskroom.Gauge.TakeName), as takeInode does.
func (o *Ops[N]) takeName(ctx context.Context, op, rel string) syscall.Errno {
	return o.takeRoom(ctx, op, rel, (*diskroom.Gauge).TakeName)
}

// takeRoom takes from o.Room what take takes, and audits its first
// refusal of a burst.
func (o *Ops[N]) takeRoom(ctx context.Context, op, rel string, take func(*diskroom.Gauge) (syscall.Errno, bool)) syscall.Errno {
	if o.Room == nil {
		return 0
	}
	errno, first := take(o.Room)
	if first && o.Gate.Audit != nil {
		o.Gate.Audit.RecordCause(ctx, op, rel, errcode.ResourceLimit, errno, errNoRoom)
	}
	return errno
}

// statNew stats an object an op just made, through its fd, for the
// adapter's new node: its generation (dirfd.Statx) tells it apart from an
// earlier file that had the same inode number.
func statNew(fd int, st *unix.Stat_t) (uint64, syscall.Errno) {
	gen, err := dirfd.Statx(fd, "", st)
	return gen, dirfd.Errno(err)
}
