package writeengine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/locks"
)

// Atomic writes. Data written through the mount never goes into the file
// itself before its commit: the first write of an owner's handle copies the
// file into a hidden sibling temp (.realm-tmp-*, made with O_EXCL, reflinked
// where the filesystem can; temp.go), and every handle that owner has on the
// file reads and writes that temp (events.go). A commit (on fsync(2), on
// the opener's last close, and on the last release: see
// Write.Flush) fsyncs the temp, checks the file is still the object
// observed when the lock was taken, renames the temp over it and fsyncs
// the directory. The file is therefore always either its old or its new
// content, whatever fails or crashes in between. The one commit that
// writes into the file is that of a file with several hard links
// (commitInPlace), which a crash during its copy can tear.
//
// The lock table entry of (file, owner) holds the Write; the entry's lock
// guards it. The lock order is internal/lockorder's.

// Durability says when a commit is made durable.
type Durability int

const (
	// DurabilityFull makes every commit durable before the close returns:
	// the temp is fsynced before the rename and the directory after it, so
	// after a power loss a file is its old or its new content. On journaled
	// ext4 the temp of a file that was empty (a new file's first version) is not
	// fsynced: ext4 writes it before the rename lands, and the directory's
	// fsync makes both durable (syncPlan).
	DurabilityFull Durability = iota
	// DurabilityAtomic fsyncs only when the application calls fsync(2); a
	// close still commits by rename. A crash of realmfs or of any process
	// never leaves a torn file; after a power loss a file closed without
	// fsync is its old or new content on journaled ext4 (OrdersRenamedData), and
	// elsewhere may be empty or a part of the new content.
	DurabilityAtomic
)

// Stage names a point of the commit where a test may inject a failure.
type Stage string

const (
	StageAfterWrite   Stage = "after-write"
	StageAfterFsync   Stage = "after-fsync"
	StageBeforeRename Stage = "before-rename"
	// StageSyncAppends: the fsync of appends in place, which are in the
	// file already (pending.go); StageSyncDir: that of the directory after
	// a commit's rename. Their failures leave the bytes in place, not durable.
	StageSyncAppends Stage = "sync-appends"
	StageSyncDir     Stage = "sync-dir"
)

// syncPlan says which fsyncs a commit makes: of the temp before the rename
// and of the directory after it. An fsync(2) (asked) makes both, whatever
// the mount's durability, but for a new file's first version with
// DurabilityAtomic (newName): its data, not its name, as POSIX has it
// (writeproto.SyncPlan). With DurabilityFull a commit makes both, but for
// one that replaces an empty file on a filesystem that writes a renamed
// file's data before the rename (emptyOrdered: journaled ext4, OrdersRenamedData):
// there nothing old can be torn, the rename lands only with the data, and
// the directory's fsync after it makes both durable. DurabilityAtomic
// syncs nothing unasked.
func syncPlan(asked bool, d Durability, emptyOrdered, newName bool) (temp, dir bool) {
	return writeproto.SyncPlan(asked, d == DurabilityFull, emptyOrdered, newName)
}

// replacesEmpty reports whether the write replaces an empty file with one
// name, whose old content cannot be torn (syncPlan). A link made since it
// was observed changed its ctime: the commit is then a conflict, not a
// commit in place.
func (w *Write[N]) replacesEmpty() bool {
	return writeproto.ReplacesEmpty(w.observed.Size, w.links(&w.observed))
}

// emptyOrdered reports whether the commit replaces an empty file on a
// filesystem that writes a renamed file's data before the rename
// (syncPlan). A publish renames onto a free name, which ext4 orders
// nothing before: its temp is synced as any durable commit's.
func (w *Write[N]) emptyOrdered() bool {
	return !w.m.Unpublished() && w.replacesEmpty() && w.eng.ordersRenames()
}

// links is st's link count in the workspace: the journal's kept links
// left out.
func (w *Write[N]) links(st *unix.Stat_t) uint64 {
	if !w.eng.host.Journaling() {
		return st.Nlink
	}
	return st.Nlink - min(uint64(w.eng.host.KeptLinks(st.Dev, st.Ino)), st.Nlink)
}

// syncTemp fsyncs the temp.
func (w *Write[N]) syncTemp() error {
	if err := dirfd.Fsync(w.temp); err != nil {
		return err
	}
	w.eng.synced("temp")
	return nil
}

// Write is one owner's write in progress on one file. It knows the file by
// where it is (fileDir, fileName), not by node: the kernel may meet the
// file again under a new node after a commit, and a rename through the
// mount updates the place (Engine.Renamed). Its methods are called with
// its entry's lock held (Entry), unless they say otherwise.
type Write[N comparable] struct {
	eng        *Engine[N]
	node       N            // the adapter's node that started it
	entry      *locks.Entry // whose lock guards this
	fileParent N            // the file's directory's node, for audit paths and its child node
	fileDir    int          // O_PATH fd of the file's directory
	fileName   string       // the file's name in it
	tempDir    int          // O_PATH fd of the directory the temp lives in
	base       int          // fd of the content last committed (or found at open)
	temp       int          // fd of the temp holding new content, -1 if none
	appendFd   int          // O_WRONLY|O_APPEND fd of base for appends in place, -1 if none
	// appendJournaled: the journal has the record of the appends in place
	// through appendFd (firstAppendInPlace).
	appendJournaled bool
	tempName        string      // its name in tempDir
	observed        unix.Stat_t // the file as this owner last saw it commit
	// justStarted: observed is base as start saw it, still under the lock
	// hold of the open that started the write (its Open uses it).
	justStarted bool
	seq         uint64      // when it began, among the mount's writes: orders lockPair
	chargedTo   locks.Owner // the owner charged for its descriptors (Host.ChargeWrite), "" none
	// xattrsLost names the file's extended attributes the temp does not
	// carry (dirfd.CopyXattrs, or a change through the mount it could not
	// take): the commit that renames the temp over the file says so.
	xattrsLost error
	// inos counts the open handles of the write by the kernel inode they
	// were opened on: one file can be on the mount under several numbers
	// at once (a node retired while a handle of it lives), and a close's
	// scan of the opener's descriptors must see all of them (Flush).
	inos map[uint64]int
	// released, if not nil, is closed when a handle of the write is
	// released: a killed writer's close waits on it (awaitReleases).
	released chan struct{}

	// m is the write's state in the protocol: what is uncommitted, which
	// handles write, when a close commits. Every commit decision is its
	// (writeproto); this package performs them.
	m writeproto.Write
}

// handleOn counts a handle of the write opened on the kernel inode ino
// (+1) or gone (-1). The caller holds w.entry's lock.
func (w *Write[N]) handleOn(ino uint64, d int) {
	if w.inos == nil {
		w.inos = make(map[uint64]int)
	}
	if w.inos[ino] += d; w.inos[ino] <= 0 {
		delete(w.inos, ino)
	}
}

// KernelInos lists the kernel inode numbers the write's handles were
// opened on: a close looks for descriptors of each (FlushStart). The
// caller holds w.entry's lock.
func (w *Write[N]) KernelInos() []uint64 {
	inos := make([]uint64, 0, len(w.inos))
	for ino := range w.inos {
		inos = append(inos, ino)
	}
	return inos
}

// cur is the fd whose content the owner sees.
func (w *Write[N]) cur() int {
	if w.temp >= 0 {
		return w.temp
	}
	w.catchUp()
	return w.base
}

// catchUp makes the file another owner's commit put in place w's base,
// while w has nothing uncommitted: appenders of several owners share the
// file (locks.Append), and one's commit of a temp (an ftruncate through
// its appending handle) renames a new file over the one the others'
// writes began on, moving all their entries with it (replace, Rekey).
// Left on the old file, their appends in place would go into a file no
// name leads to, and their stats show its size. With a temp of its own,
// w's commit finds the file changed and keeps a conflict copy instead
// (commit, conflict). A file at the name that is not the one the lock
// moved to is left alone. The caller holds w.entry's lock.
func (w *Write[N]) catchUp() {
	g := w.eng
	k := g.table.EntryKey(w.entry)
	if w.temp >= 0 || k == locks.KeyOf(&w.observed) {
		return
	}
	fd, err := dirfd.Open(w.fileDir, w.fileName, unix.O_RDONLY, 0)
	if err != nil {
		return
	}
	var st unix.Stat_t
	if dirfd.Fstat(fd, &st) != nil || locks.KeyOf(&st) != k || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		dirfd.Close(fd)
		return
	}
	// No request of the owner's asked: nobody hears a failure, which
	// closeAppend reports.
	w.closeAppend(context.Background())
	dirfd.Close(w.base)
	w.base, w.observed = fd, st
}

// close ends the write: the temp goes, and the fds it held close (ctx:
// the request that ends it).
func (w *Write[N]) close(ctx context.Context) {
	w.dropTemp()
	w.closeAppend(ctx)
	dirfd.Close(w.base)
	dirfd.Close(w.tempDir)
	dirfd.Close(w.fileDir)
	if w.chargedTo != "" {
		w.eng.host.ReleaseWrite(w.chargedTo)
	}
}

// sameFile reports whether the file is still the one observed: a process
// outside the mount that replaced or changed it makes this false.
func sameFile(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// commit makes the temp the file, in stages: seal the temp, check the file
// is unchanged since observed, replace it (or copy into it, for a file
// with several links), settle what the replacement leaves to do. durable
// forces the fsyncs whatever the mount's durability (an fsync(2) asked for
// them). It returns the errno for the caller and whether the file is new.
// Up to the rename, a failure removes the temp and leaves the file as it
// was. The kernel's cached pages of the old content are not invalidated
// (see verify): readers of other owners read passthrough or direct, and a
// cached read handle opened later drops the pages at open (no
// FOPEN_KEEP_CACHE), as NFS's close-to-open does.
func (w *Write[N]) commit(ctx context.Context, durable bool) (syscall.Errno, bool) {
	g := w.eng
	syncTemp, syncDir := syncPlan(durable, g.cfg.Durability, w.emptyOrdered(), w.m.Unpublished())
	durable = durable || g.cfg.Durability == DurabilityFull
	switch w.m.Commit() {
	case writeproto.StartNothing:
		return w.syncAppends(ctx, durable), false
	case writeproto.StartRefuse:
		// A write the caller was told failed (ENOSPC, say) left the temp
		// short: committing it would replace the file with a partial one.
		return w.fail(ctx, StageAfterWrite, w.m.Failure()), false
	}
	if stage, err := w.seal(syncTemp); err != nil {
		return w.fail(ctx, stage, err), false
	}
	// From the look to the lock's move no other owner appends in place
	// (appendData; locks.FileLock): an append the look missed would land
	// in the file the rename replaces, and be lost with it.
	file := w.entry.File()
	file.Lock()
	free := sync.OnceFunc(file.Unlock)
	defer free()
	var now unix.Stat_t
	name, lookErr := w.look(&now)
	verdict := w.m.Judge(name, uint64(w.links(&now)))
	switch verdict {
	case writeproto.DropGone:
		// Its name now leads to another file (Engine.Removed): as natively,
		// the data goes with the file it was written to.
		g.host.Debugf("%s: its name was removed or replaced through the mount while written; the bytes go with the old file, as natively", w.place())
		w.dropTemp()
		return 0, false
	case writeproto.DropUnlinked:
		// Unlinked while open: as natively, the data goes with the file.
		w.dropTemp()
		return 0, false
	case writeproto.FailCommit:
		return w.fail(ctx, StageBeforeRename, lookErr), false
	case writeproto.Conflict:
		// The bytes land beside the file, under a new name: nothing
		// there for ext4 to order them before, so they are synced as any
		// durable commit's are.
		if durable && !syncTemp {
			if err := w.syncTemp(); err != nil {
				return w.fail(ctx, StageAfterWrite, err), false
			}
		}
		return w.conflict(ctx, &now), false
	}
	if err := g.failAt(StageBeforeRename); err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	// The place judged is the place renamed to: no directory rename
	// between the two (nsMu, shared; the name is there, and a directory
	// rename's scan sees it, unless it was removed since the verdict).
	unlock := g.host.LockNames()
	if errno := g.host.DenyCommit(ctx, w); errno != 0 {
		unlock()
		w.dropTemp() // moved to a protected path since opened: never lands there
		return errno, false
	}
	if verdict == writeproto.CommitPublish {
		return w.commitNew(ctx, unlock, syncDir)
	}
	// The journal's intent, with the old file kept by link, before the
	// rename (outside LockCommit: it may wait for an fdatasync). The link
	// moves the old file's ctime and nlink: after the verdict, which
	// compares them.
	end, ts, errno := w.journal(ctx, verdict == writeproto.CommitInPlace, &now)
	if errno != 0 {
		unlock()
		if w.temp >= 0 { // not dropped by a failure already: the journal refused
			w.dropTemp()
		}
		return errno, false
	}
	if verdict == writeproto.CommitInPlace {
		unlock()
		errno, committed := w.commitInPlace(ctx) // several links: never replacesEmpty, the temp is synced
		endChange(end, committed)
		return errno, committed
	}
	st, err := w.replace(&ts)
	unlock()
	free()
	endChange(end, err == nil)
	if err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	if p := g.cfg.AfterReplace; p != nil && *p != nil {
		(*p)()
	}
	if w.xattrsLost != nil {
		g.xattrsNotKept(ctx, w.place(), w.xattrsLost)
		w.xattrsLost = nil
	}
	return w.settle(ctx, syncDir, &st), true
}

// look is what the file's name leads to at a commit (now: its stat), for
// writeproto.Write.Judge; nothing is looked at once the owner removed
// the name through the mount (gone), and lookErr is why a look failed.
func (w *Write[N]) look(now *unix.Stat_t) (name writeproto.Name, lookErr error) {
	if w.m.IsGone() {
		return writeproto.NameSame, nil
	}
	switch lookErr = dirfd.Lstat(w.fileDir, w.fileName, now); {
	case errors.Is(lookErr, unix.ENOENT):
		return writeproto.NameMissing, lookErr
	case lookErr != nil:
		return writeproto.NameUnknown, lookErr
	case !sameFile(now, &w.observed):
		return writeproto.NameChanged, nil
	}
	return writeproto.NameSame, nil
}

// tempStat is the temp's stat and generation, taken once a commit, sealed
// and before the rename: the journal's intent and replace both read it.
type tempStat struct {
	st  unix.Stat_t
	gen uint64
}

// journal takes the temp's stat (ts; none inPlace) and appends the intent
// of w's commit (Host.JournalChange): a rewrite, the temp renamed over the
// file (now, its stat) with the old file kept by a link of w.base, or,
// inPlace (several links), a rewrite in place, kept by nothing: such a
// commit cannot be undone yet. An empty file replaced is kept by nothing
// either: its record says it all. end is nil without a journal.
func (w *Write[N]) journal(ctx context.Context, inPlace bool, now *unix.Stat_t) (end func(error), ts tempStat, errno syscall.Errno) {
	g := w.eng
	if !inPlace {
		var err error
		if ts.gen, err = dirfd.Statx(w.temp, "", &ts.st); err != nil {
			return nil, ts, w.fail(ctx, StageBeforeRename, err)
		}
	}
	if !g.host.Journaling() {
		return nil, ts, 0
	}
	keep, after := w.base, (*journal.ID)(nil)
	if inPlace || now.Size == 0 {
		// An empty file (a new one's first commit, most often) is kept by
		// its record alone: Before has all undoing needs.
		keep = journal.NoKeep
	}
	if !inPlace {
		after = &journal.ID{Dev: ts.st.Dev, Ino: ts.st.Ino}
	}
	end, errno = g.host.JournalChange(ctx, journal.OpRewrite, w.entry.Owner(), w.place(), now, after, keep)
	return end, ts, errno
}

// endChange ends a journaled change (end nil: none) as done, or aborted.
func endChange(end func(error), done bool) {
	if end == nil {
		return
	}
	if done {
		end(nil)
	} else {
		end(errNotMade)
	}
}

// errNotMade ends a journaled change that was not made.
var errNotMade = errors.New("not made")

// seal readies the temp for the rename (the protocol refused a failed
// one: writeproto.StartRefuse): a durable commit fsyncs it. It returns the
// stage that failed.
func (w *Write[N]) seal(durable bool) (Stage, error) {
	g := w.eng
	if err := g.failAt(StageAfterWrite); err != nil {
		return StageAfterWrite, err
	}
	if durable {
		if err := w.syncTemp(); err != nil {
			return StageAfterWrite, err
		}
	}
	if err := g.failAt(StageAfterFsync); err != nil {
		return StageAfterFsync, err
	}
	return "", nil
}

// replace renames the temp over the file, moves the lock to the new file,
// and has the host move every node that stood for the old file to the new
// one (Host.Replaced), all in one critical section under the commit lock
// (Host.LockCommit): an open that verifies identity by name and takes the
// lock (fusefs Node.openOnce) sees the old file with the old identity and
// the old lock, or the new with the new; another owner never finds the
// new file unlocked. The node the kernel knows under the name is looked up
// (a go-fuse lock, Host.Child) before the commit lock is taken: no realm
// lock is held while waiting for one of go-fuse's. ts is the temp's stat
// (journal). It returns the new file's stat, taken after the rename.
func (w *Write[N]) replace(ts *tempStat) (unix.Stat_t, error) {
	g := w.eng
	st, gen := ts.st, ts.gen
	var old unix.Stat_t
	oldGen, err := dirfd.Statx(w.base, "", &old)
	if err != nil {
		return st, err
	}
	// Every node that stood for the old file now stands for the new one:
	// the one that started the write, and the one the kernel has for the
	// name now (after an earlier commit it can be another). A node a
	// lookup makes for the old file after this look is in neither place:
	// it catches up when it meets the new file (fusefs Node.verify and
	// inodes.Table.Succeeded).
	nodes := []N{w.node, g.host.Child(w.fileParent, w.fileName)}
	defer g.host.LockCommit()()
	if err := dirfd.Rename(w.tempDir, w.tempName, w.fileDir, w.fileName, 0); err != nil {
		return st, err
	}
	if err := g.table.Rekey(locks.KeyOf(&w.observed), locks.KeyOf(&st)); err != nil {
		g.host.Logf("%s: committed; the lock table kept the old identity: %v", w.place(), err)
	} else {
		w.pinForOthers(locks.KeyOf(&st))
	}
	g.TempMade(w.tempName, false)
	// The identities for the nodes (each keeps the inode number the kernel
	// knows, which the host marks borrowed) and the mount's records.
	was, now := FileID{Key: locks.KeyOf(&old), Gen: oldGen}, FileID{Key: locks.KeyOf(&st), Gen: gen}
	// The rename moved the new file's ctime: its stamp is taken after it.
	if err := dirfd.Fstat(w.temp, &st); err != nil {
		g.host.Logf("%s: committed; cannot stat the new file: %v", w.place(), err)
	}
	g.host.Replaced(nodes, locks.KeyOf(&w.observed), was, now, &st)
	return st, nil
}

// pinForOthers keeps the file w's commit put in place (key, whose fd is
// still w.temp) open while other owners' entries hold it: Rekey moved
// them with w's, but their writes hold descriptors of the file this commit
// replaced, so nothing else keeps this one's inode number from being
// freed and given to a new file their entries would then lock
// (locks.Table.Pin). Only appenders of several owners share a key.
func (w *Write[N]) pinForOthers(key locks.Key) {
	g := w.eng
	others := false
	for _, e := range g.table.Entries(key) {
		others = others || e != w.entry
	}
	if !others {
		return
	}
	fd, err := dirfd.Dup(w.temp)
	if err != nil {
		g.host.Logf("%s: cannot keep the committed file open for other owners' locks: %v", w.place(), err)
		return
	}
	if !g.table.Pin(key, fdCloser(fd)) {
		dirfd.Close(fd)
	}
}

// fdCloser closes a descriptor dirfd opened.
type fdCloser int

func (c fdCloser) Close() error { return dirfd.Close(int(c)) }

// settle finishes a commit whose rename is done, which nothing here can
// undo: it syncs the directory (durable) and makes the new file the base
// the owner's next write copies (the lock moved with the rename: replace).
// st is the new file's stat, taken by replace after the rename (which
// moved its ctime): what the write observes from here on. Taken later, it
// would hide a change made behind the mount meanwhile from the next
// commit's comparison.
// Its errno tells the caller that durability was not reached; the failure
// is reported (syncFailed) for a commit no caller hears.
func (w *Write[N]) settle(ctx context.Context, durable bool, st *unix.Stat_t) syscall.Errno {
	g := w.eng
	var errno syscall.Errno
	if durable {
		err := g.failAt(StageSyncDir)
		if err == nil {
			err = dirfd.SyncDir(w.fileDir)
		}
		if err != nil {
			errno = syscall.EIO
			g.syncFailed(ctx, StageSyncDir, w.place(), err)
		}
		g.synced("dir")
	}
	// The appends in place went into the old file before the temp was
	// seeded from it: they are in the new file, synced with it where the
	// commit is durable (a file appended to is no empty one, syncPlan).
	// The old file, which no name leads to now, needs no fsync.
	w.m.AppendsSynced()
	w.closeAppend(ctx)
	dirfd.Close(w.base)
	w.base, w.temp, w.tempName, w.observed = w.temp, -1, "", *st
	w.m.Committed()
	return errno
}

// commitInPlace commits to a file with more than one hard link. Renaming
// the temp over one name would split the file: the other names would keep
// the old content. So the new content, complete and fsynced in the temp, is
// copied into the file itself and fsynced. This is the one commit a crash
// can tear (during the copy); every other stage still leaves the file as it
// was.
func (w *Write[N]) commitInPlace(ctx context.Context) (syscall.Errno, bool) {
	var tst unix.Stat_t
	if err := dirfd.Fstat(w.temp, &tst); err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	out, err := dirfd.Reopen(w.base, unix.O_WRONLY)
	if err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	defer dirfd.Close(out)
	err = w.eng.host.OwnMadeChange([]int{out}, func() error {
		if err := guard.DropSetID(out); err != nil {
			return err
		}
		if err := unix.Ftruncate(out, 0); err != nil {
			return err
		}
		if err := dirfd.CloneOrCopy(out, w.temp, tst.Size); err != nil {
			return err
		}
		return dirfd.Fsync(out)
	})
	if err != nil {
		return w.fail(ctx, StageBeforeRename, err), false
	}
	w.dropTemp()
	if err := dirfd.Fstat(w.base, &w.observed); err != nil {
		w.eng.host.Logf("%s: committed in place; cannot stat it: %v", w.place(), err)
	}
	return 0, true
}

// conflict keeps the owner's new bytes as a visible copy beside a file that
// a process outside the mount changed since the lock was taken (now is the
// file as it is), and leaves the file as that process made it.
func (w *Write[N]) conflict(ctx context.Context, now *unix.Stat_t) syscall.Errno {
	g := w.eng
	if w.m.Unpublished() {
		return w.conflictNew(ctx) // the name is the host's: no file of the write's to rebase on
	}
	if copyName, err := w.keepCopy("conflict"); err != nil {
		g.host.Logf("%s: changed %s while written; the new bytes are lost: cannot keep them as %s: %v", w.place(), w.changedBy(), copyName, err)
		w.dropTemp()
	} else {
		g.host.Logf("%s: changed %s while written; the new bytes are kept as %s", w.place(), w.changedBy(), copyName)
	}
	if err := g.table.Rekey(locks.KeyOf(&w.observed), locks.KeyOf(now)); err != nil {
		g.host.Logf("%s: the lock table kept the old identity: %v", w.place(), err)
	}
	w.observed = *now
	w.rebase(ctx, now)
	return g.host.Conflicted(ctx, w.fileParent, w.fileName)
}

// changedBy says who may have changed the file a commit found changed:
// another owner appending to it through the mount (appenders share a
// file), where one holds it, else a process outside the mount.
func (w *Write[N]) changedBy() string {
	g := w.eng
	for _, e := range g.table.Entries(g.table.EntryKey(w.entry)) {
		if e != w.entry {
			return fmt.Sprintf("by another owner's appends (%s) or from outside the mount", e.Owner())
		}
	}
	return "from outside the mount"
}

// keepCopy makes the temp a visible file beside the one being written,
// named for kind (sideName), and leaves the file as it is. It returns the
// copy's name. The name is new (RENAME_NOREPLACE): a copy never replaces
// another.
func (w *Write[N]) keepCopy(kind string) (string, error) {
	g := w.eng
	at := time.Now()
	for n := 0; ; n++ {
		name := sideName(w.fileName, kind, at, n)
		err := dirfd.Rename(w.tempDir, w.tempName, w.fileDir, name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) && n < 100 {
			continue
		}
		if err != nil {
			return name, err
		}
		g.host.NotifyEntry(w.fileParent, name) // a name the kernel has not seen made
		dirfd.Close(w.temp)
		g.TempMade(w.tempName, false)
		w.temp, w.tempName = -1, ""
		w.m.TempGone()
		return name, nil
	}
}

// sideName is the name of a copy of name's new bytes kept beside it:
// NAME.realm-KIND-TIME, and -N after it for the n-th try (n > 0). NAME is
// cut short (not inside a UTF-8 sequence) so that the whole fits NAME_MAX:
// the suffix, which makes it unique, is always whole.
func sideName(name, kind string, at time.Time, n int) string {
	suffix := ".realm-" + kind + "-" + at.UTC().Format("20060102T150405.000000000Z")
	if n > 0 {
		suffix += fmt.Sprintf("-%d", n)
	}
	if room := unix.NAME_MAX - len(suffix); len(name) > room {
		for i := 0; i < utf8.UTFMax-1 && room > 0 && !utf8.RuneStart(name[room]); i++ {
			room--
		}
		name = name[:room]
	}
	return name + suffix
}

// rebase makes the file as it is now (now, its stat) the base of the
// owner's later writes, after a conflict: they apply to the file as the
// outside process left it, never to the version this write began with,
// whose content a later commit would otherwise bring back. If the file
// cannot be opened as that object, the owner's next commit fails (EIO) and
// leaves the file as it is, unless a truncating open starts afresh.
func (w *Write[N]) rebase(ctx context.Context, now *unix.Stat_t) {
	fd, err := dirfd.Open(w.fileDir, w.fileName, unix.O_RDONLY, 0)
	var st unix.Stat_t
	if err == nil {
		if err = dirfd.Fstat(fd, &st); err == nil && (st.Dev != now.Dev || st.Ino != now.Ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG) {
			err = errors.New("the file changed again")
		}
	}
	if err != nil {
		if fd >= 0 {
			dirfd.Close(fd)
		}
		w.eng.host.Logf("%s: cannot reopen the file after a conflict (%v): the next commit of its writer fails", w.place(), err)
		w.m.Fail(syscall.EIO)
		return
	}
	w.closeAppend(ctx) // the conflict's EBUSY is the caller's answer; a failure is reported
	dirfd.Close(w.base)
	w.base, w.observed = fd, st
}

// fail ends a commit that failed at stage before its rename: the temp is
// removed, the file is as it was, and the caller gets EIO.
func (w *Write[N]) fail(ctx context.Context, stage Stage, err error) syscall.Errno {
	w.dropTemp()
	w.eng.commitFailed(ctx, stage, w.place(), err)
	return syscall.EIO
}

// place is the workspace path of the file being written, for logs and audit
// lines.
func (w *Write[N]) place() string { return w.eng.host.RelPath(w.fileParent, w.fileName) }

// commitFailed reports a commit that failed at stage: one audit line
// (WRITE_NOT_ATOMIC, with the cause) and one line in the daemon's log, since
// a commit at the last release has no caller to return its error to.
func (g *Engine[N]) commitFailed(ctx context.Context, stage Stage, rel string, err error) {
	g.host.Audit(ctx, "commit:"+string(stage), rel, errcode.WriteNotAtomic, syscall.EIO, err)
	g.host.Logf("%s: commit failed at %s: %v; the file is unchanged", rel, stage, err)
}

// syncFailed reports an fsync that failed after the bytes were in place
// (stage: the appends in place, or the directory after a commit's rename):
// the file has them, but a power loss may lose them. As commitFailed: one
// audit line (WRITE_NOT_ATOMIC, with the cause) and one line in the
// daemon's log, since a commit at the last release, or an fd closed when
// another owner's commit replaced the file, has no caller to tell.
func (g *Engine[N]) syncFailed(ctx context.Context, stage Stage, rel string, err error) {
	g.host.Audit(ctx, "commit:"+string(stage), rel, errcode.WriteNotAtomic, syscall.EIO, err)
	g.host.Logf("%s: fsync failed at %s: %v; the bytes are in the file, but not durable", rel, stage, err)
}

// xattrsNotKept reports a commit whose new content lacks extended
// attributes the file had (lost names them and why): the bytes are
// committed, and the host may need the ACL or label back. One audit line
// (XATTR_NOT_KEPT, not a refusal: no errno) and one line in the daemon's
// log.
func (g *Engine[N]) xattrsNotKept(ctx context.Context, rel string, lost error) {
	// Its text, not the errno it wraps: the line names the attributes.
	g.host.Audit(ctx, "commit", rel, errcode.XattrNotKept, 0, errors.New(lost.Error()))
	g.host.Logf("%s: committed without extended attributes the file had, which its new content could not take: %v", rel, lost)
}

// killed settles the write of h, whose opener a signal (sig) is killing
// before it closed the file (tid is the closing thread): nothing written
// is silently lost, and nothing old is torn. writeproto.Write.Killed
// decides: the bytes are committed when that tears nothing that was there
// before the writer (the file was empty when h opened it, or h only
// appended to it), kept beside the file as NAME.realm-recovered-TIME
// otherwise (or when a write into the temp failed), and left to the
// owner's last close or release when another handle shares the temp.
// Either is one audit line.
func (w *Write[N]) killed(ctx context.Context, h *writeproto.Handle, sig int, tid uint32) {
	g := w.eng
	how := fmt.Sprintf("killed by %s", unix.SignalName(syscall.Signal(sig)))
	switch w.m.Killed(h) {
	case writeproto.KillNothing:
	case writeproto.KillInFile:
		// Its appends went into the file as they were made: nothing to
		// commit, nothing torn.
		w.syncAppends(ctx, g.cfg.Durability == DurabilityFull) // reports its failure
		g.host.Logf("%s: its writer (thread %d) was %s before it closed the file; its appends are in the file", w.place(), tid, how)
		g.writerKilled(ctx, w.place(), errcode.WriterKilledCommitted, how)
	case writeproto.KillCommit:
		errno, committed := w.commit(ctx, false)
		if errno == 0 && committed {
			g.host.Logf("%s: its writer (thread %d) was %s before it closed the file; committed, as nothing old was torn", w.place(), tid, how)
			g.writerKilled(ctx, w.place(), errcode.WriterKilledCommitted, how)
		}
		// A commit that failed or met a conflict said so itself.
	case writeproto.KillRecover:
		name, err := w.keepCopy("recovered")
		if err != nil {
			g.host.Logf("%s: its writer (thread %d) was %s before it closed the file; the new bytes are lost: cannot keep them as %s: %v", w.place(), tid, how, name, err)
			g.commitFailed(ctx, StageAfterWrite, w.place(), err)
			w.dropTemp()
			return
		}
		w.vanish() // a file not yet published has no old content: the copy is all of it
		g.host.Logf("%s: not committed: its writer (thread %d) was %s before it closed the file; the file keeps its old content, the new bytes are kept as %s", w.place(), tid, how, name)
		g.writerKilled(ctx, w.place(), errcode.WriterKilledRecovered, how+"; kept as "+name)
	}
}

// writerKilled audits what became of a killed writer's bytes (code) in the
// file rel; how says how it died and where the bytes are.
func (g *Engine[N]) writerKilled(ctx context.Context, rel string, code errcode.Code, how string) {
	g.host.Audit(ctx, "close", rel, code, 0, errors.New(how))
}
