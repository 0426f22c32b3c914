package nameops

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
)

// Rename renames name in from to newName in to, whose fds ofd and nfd the
// caller prepared (the source, then the target: their directories' checks
// only, which read their paths oldAt and newAt; the names are judged
// here); flags (RENAME_NOREPLACE, RENAME_EXCHANGE) pass through to the
// one renameat2. RENAME_WHITEOUT is refused (PATH_ESCAPE: it would leave a
// 0:0 character device at the source name, a device node mknod refuses),
// then a file another owner is
// writing (a wait of the lock table: before nsMu), then, under nsMu, the
// names judged once at their places now (admit.Gate.JudgeRename: a
// credential, a protected target), a directory holding a credential or
// whose contents would be protected at its new name, a symlink that would
// climb out of the root from its new place (the object, or a link beneath
// a directory moved shallower: admit.Gate.DenyLinkMove), and the rename
// itself (renameJudged). The writes in progress on the files moved follow
// them.
func (o *Ops[N]) Rename(ctx context.Context, from N, ofd int, oldAt DirPath, name string, to N, nfd int, newAt DirPath, newName string, flags uint32) syscall.Errno {
	exchange := flags&unix.RENAME_EXCHANGE != 0
	if flags&unix.RENAME_WHITEOUT != 0 {
		return o.Gate.Refuse(ctx, "rename", from, name, errcode.PathEscape, admit.RuleEscapeWhiteout)
	}

	names := o.Gate.Names
	src, dst := names.LockOf(ofd, name), names.LockOf(nfd, newName)
	if errno := o.Gate.HeldByOther(ctx, "rename", to, newName, dst); errno != 0 {
		return errno
	}
	if exchange {
		if errno := o.Gate.HeldByOther(ctx, "rename", from, name, src); errno != 0 {
			return errno
		}
	}
	// The files moved are marked from the look that finds their writes
	// until the writes have followed: no commit of theirs meets a name
	// half way (guard.NameLocks.BeginMove).
	ls, endMove := names.BeginMove(o.Engine.BeginMoves, []guard.FileLock{src, dst}, guard.Place{Dir: ofd, Name: name}, guard.Place{Dir: nfd, Name: newName})
	defer endMove()
	replaced := dst.Held // by the caller's owner: another's was refused
	src, dst = ls[0], ls[1]
	r := renaming[N]{from: from, to: to, ofd: ofd, nfd: nfd, oldAt: oldAt, newAt: newAt, name: name, newName: newName, flags: flags, me: o.Gate.Owner(ctx)}
	if errno := o.renameJudged(ctx, &r); errno != 0 {
		return errno
	}
	o.Gate.Guard.MadeRenamed(nfd, r.newRel, newName)
	if exchange {
		o.Gate.Guard.MadeRenamed(ofd, r.oldRel, name)
	}
	// A write in progress follows its file to the new name, one begun
	// since the look too (renamed finds none if there is none).
	if src.Regular() {
		o.Engine.Renamed(src.Key, to, nfd, newName)
	}
	if exchange && dst.Regular() {
		o.Engine.Renamed(dst.Key, from, ofd, name)
	}
	if replaced && !exchange && dst.Key != src.Key {
		// The caller's owner's own write of the file replaced (another's
		// was refused) goes with that file, as natively.
		o.Engine.Removed(dst.Key, nfd, newName)
	}
	return 0
}

// renaming is one rename's names, and their workspace paths as the rename
// found them (renameUnder).
type renaming[N Node] struct {
	from, to       N
	ofd, nfd       int
	oldAt, newAt   DirPath // the directories' paths as their fds' checks read them
	name, newName  string
	flags          uint32
	oldRel, newRel string
	me             locks.Owner // the caller's owner
}

// renameJudged judges r's names and moves under nsMu, and renames: shared
// for names that are no directory, exclusive when a directory's contents
// are scanned (admit.Gate.DenyDirRename; guard.RenameScans), so that no
// name enters it between the scan and the rename. A name found to be a
// directory only under the shared lock (it became one since) is judged
// again under the exclusive one.
func (o *Ops[N]) renameJudged(ctx context.Context, r *renaming[N]) syscall.Errno {
	exclusive := guard.RenameScans(r.names())
	for {
		unlock := o.LockNames(exclusive)
		errno, again := o.renameUnder(ctx, r, exclusive)
		unlock()
		if !again {
			return errno
		}
		exclusive = true
	}
}

// names is r's names as the guard judges them.
func (r *renaming[N]) names() guard.RenameNames {
	return guard.RenameNames{
		OldDir: r.ofd, NewDir: r.nfd,
		Name: r.name, NewName: r.newName,
		OldRel: r.oldRel, NewRel: r.newRel,
		Exchange: r.flags&unix.RENAME_EXCHANGE != 0,
	}
}

// renameUnder is renameJudged's step under nsMu: the names at their
// places now (their directories' paths as the caller's checks read them
// while no directory has been renamed through the mount since, else read
// again: Ops.dirRel), judged (guard.Guard.JudgeRename: both
// names of an exchange against the protect rule, then each name's own
// checks), each directory moved (admit.Gate.DenyDirRename, exclusive only:
// again is true when one is met under the shared lock), then renameat2.
func (o *Ops[N]) renameUnder(ctx context.Context, r *renaming[N], exclusive bool) (errno syscall.Errno, again bool) {
	g := o.Gate
	exchange := r.flags&unix.RENAME_EXCHANGE != 0
	r.oldRel = admit.Join(o.dirRel(r.from, r.ofd, r.oldAt), r.name)
	r.newRel = admit.Join(o.dirRel(r.to, r.nfd, r.newAt), r.newName)
	if errno := g.JudgeRename(ctx, r.names()); errno != 0 {
		return errno, false
	}
	if errno, again := g.DenyDirRename(ctx, r.from, r.ofd, r.name, r.oldRel, r.newRel, exclusive); errno != 0 || again {
		return errno, again
	}
	if exchange {
		if errno, again := g.DenyDirRename(ctx, r.to, r.nfd, r.newName, r.newRel, r.oldRel, exclusive); errno != 0 || again {
			return errno, again
		}
	}
	if errno, again := g.DenyLinkMove(ctx, r.from, r.ofd, r.name, r.oldRel, r.newRel, exclusive); errno != 0 || again {
		return errno, again
	}
	if exchange {
		if errno, again := g.DenyLinkMove(ctx, r.to, r.nfd, r.newName, r.newRel, r.oldRel, exclusive); errno != 0 || again {
			return errno, again
		}
	}
	// The file renamed, and a file replaced or exchanged that keeps
	// another name: the rename moves their ctimes.
	sfd, dfd := g.Guard.MadeFd(r.ofd, r.name), g.Guard.MadeFd(r.nfd, r.newName)
	defer dirfd.Close(sfd)
	defer dirfd.Close(dfd)
	// The last look at who writes what the rename replaces and the rename
	// are one step against a write open's look and lock (commitMu): a file
	// another owner opened for writing since admit.Gate.HeldByOther is not
	// renamed over, where its commit would meet another file.
	o.CommitMu.Lock()
	if held, other := g.Names.ReplacesOthers(r.names(), r.me); other {
		o.CommitMu.Unlock()
		return g.RefuseHeld(ctx, "rename", r.to, r.newName, held.Key, held.Holder), false
	}
	// The journal's intent, the file replaced kept by link: under
	// commitMu, after the last look at who writes it, so that no write
	// open meets the link's change of its ctime and nlink (a write opened
	// between the two would take it for a change from outside).
	rec := o.Journal.Record(ctx, r.me, journal.OpRename, r.oldRel)
	rec.To = r.newRel
	c, errno := o.Journal.Rename(ctx, rec, r.ofd, r.name, r.nfd, r.newName, r.flags&unix.RENAME_EXCHANGE != 0)
	if errno != 0 {
		o.CommitMu.Unlock()
		return errno, false
	}
	err := g.Guard.OwnChange([]int{sfd, dfd}, func() error {
		return dirfd.Rename(r.ofd, r.name, r.nfd, r.newName, uint(r.flags))
	})
	o.CommitMu.Unlock()
	o.Journal.End(c, err, nil)
	return dirfd.Errno(err), false
}
