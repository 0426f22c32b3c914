package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/writeengine"
	"github.com/realm-dev/realm/locks"
)

// The write engine (writeengine) in this mount: it keeps each owner's
// write in progress of a file and performs its commits; this file is the
// mount as the engine sees it (engineHost), and the engine's names as the
// rest of fusefs and realmfs's callers use them.

// pendingWrite is one owner's write in progress on one file, with this
// package's nodes.
type pendingWrite = writeengine.Write[*Node]

// Durability says when a commit is made durable (writeengine.Durability).
type Durability = writeengine.Durability

// The durabilities (writeengine).
const (
	DurabilityFull   = writeengine.DurabilityFull
	DurabilityAtomic = writeengine.DurabilityAtomic
)

// Stage names a point of the commit where a test may inject a failure
// (Options.FailAt).
type Stage = writeengine.Stage

// The stages (writeengine).
const (
	StageAfterWrite   = writeengine.StageAfterWrite
	StageAfterFsync   = writeengine.StageAfterFsync
	StageBeforeRename = writeengine.StageBeforeRename
	StageSyncAppends  = writeengine.StageSyncAppends
	StageSyncDir      = writeengine.StageSyncDir
)

// TempPrefix starts the names of realm's own temp files in the backing dir.
// They are never listed, never found by lookup and never created through the
// mount.
const TempPrefix = writeengine.TempPrefix

// engineHost is the mount as the write engine reaches it
// (writeengine.Host).
type engineHost struct{ f *FS }

var _ writeengine.Host[*Node] = engineHost{}

func (h engineHost) Logf(format string, args ...any)   { h.f.logf(format, args...) }
func (h engineHost) Debugf(format string, args ...any) { h.f.debugf(format, args...) }

// Audit writes one audit line, with its cause.
func (h engineHost) Audit(ctx context.Context, op, rel string, code errcode.Code, errno syscall.Errno, cause error) {
	if h.f.opts.Audit != nil {
		h.f.opts.Audit.RecordCause(ctx, op, rel, code, errno, cause)
	}
}

// RelPath is name's workspace path in dir (Node.Rel).
func (h engineHost) RelPath(dir *Node, name string) string { return dir.Rel(name) }

// LockNames takes nsMu shared: a commit's rename puts a name in place.
func (h engineHost) LockNames() (unlock func()) { return h.f.nsLock(false) }

// LockCommit takes commitMu: the rename, the lock's move and the nodes'
// new identity are one step against the opens and stats that verify a
// node by name (Node.openOnce, statByName, guard.NameLocks.LockOf).
func (h engineHost) LockCommit() (unlock func()) {
	h.f.commitMu.Lock()
	return h.f.commitMu.Unlock
}

// DenyCommit is the protect rule on a commit's place (admit.Gate.DenyCommit).
func (h engineHost) DenyCommit(ctx context.Context, w *pendingWrite) syscall.Errno {
	return h.f.gate.DenyCommit(ctx, w.Dir(), w.DirFd(), w.Name(), w.Node())
}

// Conflicted is the refusal of a commit that met a change from outside.
func (h engineHost) Conflicted(ctx context.Context, dir *Node, name string) syscall.Errno {
	return h.f.gate.Refuse(ctx, "commit", dir, name, errcode.LockConflict, admit.RuleLockChanged)
}

// OwnMadeChange keeps a made file known across the mount's own change.
func (h engineHost) OwnMadeChange(fds []int, change func() error) error {
	return h.f.guard.OwnChange(fds, change)
}

// Child is the node the kernel knows as name in dir (go-fuse's lookup).
func (h engineHost) Child(dir *Node, name string) *Node { return asNode(dir.childInode(name)) }

// Replaced moves the nodes that stood for the file a commit replaced
// (stoodFor) to the new file: each keeps the inode number the kernel
// knows, which the backing filesystem may now give to a new file, so the
// number is marked borrowed (inodes.Table.Rekeyed). The mount's records of
// the old file (successors, for Node.catchUp; the made set) follow it.
func (h engineHost) Replaced(nodes []*Node, stoodFor locks.Key, old, new writeengine.FileID, st *unix.Stat_t) {
	f := h.f
	for _, m := range nodes {
		if m != nil && m.key() == stoodFor {
			m.setIdent(new.Key.Dev, new.Key.Ino, new.Gen)
			f.inos.Rekeyed(new, m, m.StableAttr().Ino)
		}
	}
	f.inos.Succeeded(old, new)
	f.guard.Made.Carry(old, new, st)
}

// Published forgets an unpublished file (unpublished.go): its name is
// BACKING's to answer for again.
func (h engineHost) Published(node, _ *Node, _ string) { h.f.unpublished.Remove(node) }

// NotifyEntry and NotifyInode queue invalidations for the kernel.
func (h engineHost) NotifyEntry(dir *Node, name string) { h.f.notify.Entry(dir.EmbeddedInode(), name) }
func (h engineHost) NotifyInode(n *Node)                { h.f.notify.Inode(n.EmbeddedInode()) }

// ChargeWrite charges owner admit.PendingFds for a write in progress, if the
// mount bounds descriptors (fusefs/admit: fds.go); ReleaseWrite gives them back.
func (h engineHost) ChargeWrite(owner locks.Owner) bool {
	if !h.f.fds.Bounded() {
		return false
	}
	h.f.fds.Charge(owner, admit.PendingFds)
	return true
}

func (h engineHost) ReleaseWrite(owner locks.Owner) { h.f.fds.Release(owner, admit.PendingFds) }

// Journaling reports whether the mount keeps a journal (writeengine.Journal).
func (h engineHost) Journaling() bool { return h.f.journal.On() }

func (h engineHost) KeptLinks(dev, ino uint64) uint32 { return h.f.journal.KeptLinks(dev, ino) }

// JournalChange is the journal's intent of a commit
// (writeengine.Journal): see there.
func (h engineHost) JournalChange(ctx context.Context, op journal.Op, owner locks.Owner, rel string, before *unix.Stat_t, after *journal.ID, keep int) (func(error), syscall.Errno) {
	rec := journal.Record{Owner: string(owner), Op: op, Path: rel, Before: journal.ObjectOf(before), After: after}
	return h.f.journal.Commit(ctx, rec, keep)
}

// JournalCreate is the journal's intent of a create that publishes a file
// or makes it real (writeengine.Journal): see there.
func (h engineHost) JournalCreate(ctx context.Context, owner locks.Owner, rel string) (func(error, *journal.ID), syscall.Errno) {
	j := &h.f.journal
	c, errno := j.Begin(ctx, "create", rel, j.Record(ctx, owner, journal.OpCreate, rel), journal.NoKeep)
	if c == nil {
		return nil, errno
	}
	return func(err error, made *journal.ID) { j.End(c, err, made) }, 0
}
