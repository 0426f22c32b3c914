// Package writeproto is the write path's protocol as one state machine,
// with no I/O and no go-fuse: for each owner's write in progress on a file
// (Write) and each of its handles (Handle), the kernel's events (open,
// write, truncate, fsync, FLUSH, RELEASE, a writer killed, a rename over
// the file, a change behind the mount) and what each makes the daemon do:
// nothing, make a temp, write in place, commit by rename or in place, keep
// a conflict or recovery copy, drop the bytes with a file no name leads to.
//
// fusefs gathers the facts an event needs (the closing thread's other
// descriptors, whether a write(2) is in flight, what the file's name leads
// to now), asks the machine, performs the action it returns with its
// system calls, and reports the outcome back (TempMade, Committed, ...).
// It decides nothing about commits of its own. The caller serialises all
// calls on one Write (fusefs: the lock table entry's lock).
//
// The machine is declared, and checked: every event method checks the
// call against two tables and records one that does not fit as a
// Violation (Err, OnViolation), which fusefs logs where the write ends and
// the tests fail on. An event out of order is the caller's bug: the
// machine's decisions would rest on a state the file is not in.
//
// The states of one Write (the table's columns):
//
//   - idle: no handle.
//   - clean: handles, no temp, nothing uncommitted. Appends in place
//     (O_APPEND without O_TRUNC) leave the write here: they went into
//     the file.
//   - seeded: a temp, no change in it yet.
//   - pending: a temp with changes; the next commit point renames it over
//     the file (or copies it in, for a file with several links).
//   - failed: a write into the temp failed; the temp is never committed
//     (Commit answers StartRefuse).
//   - stale: no temp, and the file could not be reopened after a conflict:
//     a temp made from the old base is failed (its commit fails, EIO),
//     unless a truncating open starts afresh (TempGone).
//
// Gone is no column but a mark over one: the owner removed the file's name
// through the mount (or renamed another file over it), and the bytes go
// with the old file, as natively (Judge answers DropGone). State reports it.
//
// Unpublished is another mark: the write made the file (Open.New) as its
// temp alone, and the file's name is not in BACKING yet. Its first commit
// publishes the temp at the name (Judge answers CommitPublish where the
// name is free, Conflict where the host made it meanwhile); anything else
// that reaches the file or its name first makes it real (MadeReal: the
// empty file at the name, as a create made it), and the write goes on as
// any other from there.
//
// The state table: for each event (a line) and state (a column), "-"
// rejects the event there, "=" accepts it and leaves the state, a state's
// name is the one it leads to, "a|b" the ones its arguments choose from.
//
//	event           idle   clean   seeded           pending         failed  stale
//	Open            clean  =       =                =               =       =
//	Truncated       -      -       pending          -               -       -
//	Release         -      =       =                =               =       =
//	Released        -      =|idle  =|idle           =               =       =|idle
//	WriteRoute      -      =       =                =               =       =
//	PlaceChecked    -      =       =                =               =       =
//	AppendedInPlace -      =       -                -               -       -
//	AppendsSynced   =      =       =                =               =       =
//	TempMade        -      seeded  -                -               -       failed
//	TempGone        =      =       clean            clean           clean   clean
//	TempWrite       -      -       =                =               =       -
//	TempWritten     -      -       =|pending|failed =|failed        =       -
//	Changing        -      =       =                =               =       =
//	TempChange      -      -       =                =               =       -
//	ChangeDone      -      -       =|pending|failed =|failed        =       -
//	Fail            -      stale   -                -               -       -
//	Commit          -      =       =                =               =       =
//	Judge           -      -       -                =               -       -
//	Committed       -      -       -                clean           -       -
//	FlushStart      -      =       =                =               =       =
//	Flush           -      =       =                =               =       =
//	Killed          -      =       =                =               =       =
//	Renamed         -      =       =                =               =       =
//	Removed         -      =       =                =               =       =
//	MadeReal        -      =       =                =               =       =
//
// Read off it, among others: no write's last handle goes (Released to
// idle) with bytes uncommitted; a temp is made only where there is none;
// a commit renames only a temp with changes; idle takes only the cleanup
// of the write that ended.
//
// The exchange table: some events begin a run of calls the caller makes
// under one hold of the write's lock, which another event ends; in
// between only the events listed are accepted, and the ending events come
// only within their exchange (Released and Killed of its own handle).
//
//	exchange    begun by                  accepts                            ended by
//	opening     Open with O_TRUNC         TempGone TempMade AppendsSynced    Truncated, Released
//	releasing   Release                   TempGone AppendsSynced Fail Commit  Released
//	committing  Commit (StartSeal/Refuse) Judge AppendsSynced                TempGone, Committed
//	killing     Flush (FlushKilled)       nothing                            Killed
//
// And answers, which need not follow at once: TempWritten answers the
// last TempWrite, ChangeDone the last TempChange, AppendedInPlace the
// handle's WriteRoute that said RouteInPlace, Flush the handle's
// FlushStart that said true, Judge a StartSeal (not a StartRefuse),
// Committed a Judge that said CommitRename, CommitInPlace or
// CommitPublish. An event that names a handle names one open in the write.
//
// The commit points: the opener's last FLUSH of a writing handle (close
// returns the commit's error), fsync(2), a truncate(2) by name, and the
// owner's last RELEASE (what is left).
package writeproto

import (
	"slices"
	"syscall"
)

// State names the state of a Write: a column of the state table, or Gone.
type State int

const (
	Idle State = iota
	Clean
	Seeded
	Pending
	Failed
	Stale
	// Gone marks a write whose name the owner removed through the mount:
	// State reports it over the column the write is in.
	Gone
)

func (s State) String() string {
	return [...]string{"idle", "clean", "seeded", "pending", "failed", "stale", "gone"}[s]
}

// Open is how a handle was opened.
type Open struct {
	Write    bool // it may change the file (write access, O_TRUNC or O_APPEND)
	Append   bool // O_APPEND (which makes Write)
	Truncate bool // O_TRUNC (which makes Write)
	// Fresh: the file was empty, as the owner saw it, at the open (before
	// its O_TRUNC): a writer killed through it tears nothing old.
	Fresh bool
	// New: the open made the file as its temp alone, not yet at its name
	// (the write is unpublished). It comes with Truncate: the open makes
	// the temp (TempMade, then Truncated), so that even a close with
	// nothing written commits, and publishes the file.
	New bool
	// Opener is the process that opened it, and Kind what a scan of that
	// process's descriptors can tell of the open (its access mode and
	// O_APPEND): two handles of one opener and one kind are told apart by
	// no scan, so a scan that finds none of that kind left finds both gone.
	Opener, Kind uint32
	// Hold is the handle's hold on the file's lock, told when the handle
	// is closing (its opener holds no descriptor of it any more: the
	// kernel's RELEASE is on its way, and a conflicting open may wait for
	// it) and when it is active again. May be nil.
	Hold Hold
}

// Hold is a handle's hold on the lock table (a *locks.Lease).
type Hold interface {
	Closing()
	Active()
}

// Handle is one open of the file by the owner (a write open, or a read
// open that joined the owner's uncommitted bytes).
type Handle struct {
	open Open
	// w is the write it is open in, id its number there (for a
	// Violation), live: it is open (Open came, Released not yet).
	w    *Write
	id   int
	live bool
	// changed: a write or truncate came through it; inPlace: an append
	// through it went into the file; writing: it changed the file (or
	// opened it O_TRUNC) since the write's last commit and its opener
	// still holds a descriptor of it: counted in Write.writing.
	changed, inPlace, writing bool
	// closing: its opener holds no descriptor of it, as far as the daemon
	// can tell; Hold was told.
	closing bool
	// Answers owed: routed, WriteRoute said RouteInPlace (AppendedInPlace
	// may come); flushes, the FlushStarts that said true (a Flush each).
	routed  bool
	flushes int
}

// Closing reports whether h's opener holds no descriptor of it, as far as
// the daemon can tell (its RELEASE is on its way).
func (h *Handle) Closing() bool { return h.closing }

// markClosing records that h's opener let go of its last descriptor.
func (h *Handle) markClosing() {
	if !h.closing {
		h.closing = true
		if h.open.Hold != nil {
			h.open.Hold.Closing()
		}
	}
}

// active records that h is in use again after it seemed closed (a write
// through a descriptor the scan could not see).
func (h *Handle) active() {
	if h.closing {
		h.closing = false
		if h.open.Hold != nil {
			h.open.Hold.Active()
		}
	}
}

// Truncates reports whether h was opened O_TRUNC for writing.
func (h *Handle) Truncates() bool { return h.open.Truncate }

// truncates reports whether h's open emptied a file that was there: a
// new file's (Open.New) truncated nothing, and its handle appends in place
// once the file is published, as a create's handle does.
func (h *Handle) truncates() bool { return h.open.Truncate && !h.open.New }

// Writing reports whether h is counted among the write's writers.
func (h *Handle) Writing() bool { return h.writing }

// Write is one owner's write in progress on one file. Its zero value is
// idle.
type Write struct {
	// OnViolation, if set, hears each event the machine does not accept
	// (Err keeps the first): a test fails there, on the spot.
	OnViolation func(error)

	st  State      // the column of the state table
	ex  []exchange // the exchanges in progress, innermost last
	err *Violation // the first violation
	ids int        // handles numbered so far
	hs  []*Handle  // the open handles sharing it, readers too
	// writing: of those, write handles whose opener still holds a descriptor.
	writing int
	failed  syscall.Errno // failed, stale: the failure the commit reports
	// overwrites: the temp holds a change other than an append at its
	// end: its old bytes may be half rewritten.
	overwrites bool
	appended   bool // appends in place not yet fsynced
	gone       bool
	// moved: a rename gave the file a new place since its last append in
	// place, which must pass the protect rule before the next one lands.
	moved bool
	// Answers owed: wrote, a TempWrite (TempWritten may come); changing, a
	// TempChange (ChangeDone may come).
	wrote, changing bool
	// unpublished: the file is the temp alone, its name not yet in
	// BACKING (Open.New).
	unpublished bool
}

// State is w's state.
func (w *Write) State() State {
	if w.gone && w.st != Idle {
		return Gone
	}
	return w.st
}

// Handles is the number of open handles.
func (w *Write) Handles() int { return len(w.hs) }

// Writers is the number of handles whose opener is still writing.
func (w *Write) Writers() int { return w.writing }

// HasTemp reports whether w has a temp.
func (w *Write) HasTemp() bool { return w.st == Seeded || w.st == Pending || w.st == Failed }

// Dirty reports whether the temp holds uncommitted changes (a failed
// temp's too: they are not to be lost without a word).
func (w *Write) Dirty() bool { return w.st == Pending || w.st == Failed }

// IsGone reports whether the owner removed the file's name through the mount.
func (w *Write) IsGone() bool { return w.gone }

// Unpublished reports whether the file is still the write's temp alone,
// its name not yet in BACKING (Open.New).
func (w *Write) Unpublished() bool { return w.unpublished }

// Overwrites reports whether the temp holds a change other than an
// append at its end (of a new file: anything but appends since its
// create): published as it is, a file without one shows what appends in
// place would have.
func (w *Write) Overwrites() bool { return w.overwrites }

// Failure is the error of a write into the temp that failed (or of the
// rebase that left the write stale), 0 if none.
func (w *Write) Failure() syscall.Errno {
	if w.st == Failed || w.st == Stale {
		return w.failed
	}
	return 0
}

// --- open and release ---

// Open: the owner opens the file (event OPEN). A handle that truncates
// asks the caller to drop any temp and make an empty one (TempMade), then
// Truncated; if that fails, Released (the opening exchange). An idle
// write opened again starts afresh.
func (w *Write) Open(o Open) *Handle {
	next := w.st
	if w.st == Idle {
		*w = Write{OnViolation: w.OnViolation, err: w.err, ids: w.ids, unpublished: o.New}
		next = Clean
	}
	if o.New && (!o.Truncate || next != Clean || w.st != Idle) {
		w.violated(EvOpen, nil, "a new file's open comes first, with Truncate")
	}
	w.ids++
	h := &Handle{open: o, w: w, id: w.ids, live: true}
	w.step(EvOpen, nil, next)
	w.hs = append(w.hs, h)
	if o.Truncate {
		w.begin(opening, h)
	}
	return h
}

// Truncated: h's O_TRUNC made the temp empty: a change, and h's opener
// writes from here on. A new file's open (Open.New) cut nothing: its
// opener writes only once it does, so that another process's close of
// the same owner commits the file as natively it shows it.
func (w *Write) Truncated(h *Handle) {
	w.step(EvTruncated, h, Pending)
	w.end(opening)
	w.overwrites = !w.unpublished // a new file's truncation cuts nothing
	if !h.writing && !w.unpublished {
		h.writing = true
		w.writing++
	}
}

// ReleaseAction is what a RELEASE of a handle does.
type ReleaseAction int

const (
	// ReleaseNone: another handle of the owner is still open; its last
	// release commits.
	ReleaseNone ReleaseAction = iota
	// ReleaseDropTruncate: the open failed in the kernel after the daemon
	// made the handle (no FLUSH ever came, nothing was written): its
	// O_TRUNC must not empty the file; drop the temp.
	ReleaseDropTruncate
	// ReleaseCommit: the owner's last handle commits what is left.
	ReleaseCommit
)

// Release: the kernel releases h (event RELEASE, after its last
// descriptor closed); flushed: a close of one of its descriptors came
// (FLUSH) before. The caller performs the action, then Released (the
// releasing exchange).
func (w *Write) Release(h *Handle, flushed bool) ReleaseAction {
	w.step(EvRelease, h, w.st)
	w.begin(releasing, h)
	w.leave(h)
	// A RELEASE proves that no descriptor of h is left, whatever its
	// FLUSHes could tell (a close at exit, whose fd table is gone, tells
	// nothing): a conflicting open waits for the commit it may start
	// (fsyncs: past locks.ReleaseGrace under load), not the grace alone.
	h.markClosing()
	switch {
	case len(w.hs) != 1:
		return ReleaseNone
	case !flushed && h.truncates() && !h.changed:
		return ReleaseDropTruncate
	}
	return ReleaseCommit
}

// Released drops h from the count; last: it was the owner's last handle,
// and the write ends (the caller closes its temp, fds and lease).
func (w *Write) Released(h *Handle) (last bool) {
	next := w.st
	if len(w.hs) == 1 && w.hs[0] == h {
		next = Idle
	}
	w.step(EvReleased, h, next)
	if w.within(opening) != nil {
		w.end(opening)
	} else {
		w.end(releasing)
	}
	w.leave(h)
	h.live = false
	if i := slices.Index(w.hs, h); i >= 0 {
		w.hs = slices.Delete(w.hs, i, i+1)
	}
	return len(w.hs) == 0
}

// join counts h among the writers, for a change made through it.
func (w *Write) join(h *Handle) {
	if h == nil {
		return
	}
	h.active()
	h.changed = true
	if !h.writing {
		h.writing = true
		w.writing++
	}
}

// leave takes h out of the writers.
func (w *Write) leave(h *Handle) {
	if h != nil && h.writing {
		h.writing = false
		w.writing--
	}
}

// --- writes ---

// Route is where a write(2) goes.
type Route int

const (
	// RouteTemp: into the temp (made first, seeded with the file).
	RouteTemp Route = iota
	// RouteInPlace: at the end of the file itself (an append with nothing
	// of the owner's uncommitted): no temp, no commit, no new inode.
	RouteInPlace
)

// WriteRoute: a write(2) through h (event WRITE) goes into the file in
// place when it appends (appends: O_APPEND as the kernel sent it with
// this write, which fcntl(F_SETFL) may have set or cleared since the
// open) through a handle not opened O_TRUNC, the owner has no temp and no
// failed write, and the file has no set-id bit (setID), which new content
// never keeps, whoever writes: the temp's copy drops it. The caller may
// still take the temp's route (the file not writable by the daemon).
// Before an append in place lands, the caller checks the file's place if
// PlaceMoved.
func (w *Write) WriteRoute(h *Handle, appends, setID bool) Route {
	w.step(EvWriteRoute, h, w.st)
	h.routed = false // a route the caller did not take is owed nothing
	if !appends || h.truncates() || w.st != Clean || setID {
		return RouteTemp
	}
	h.routed = true
	return RouteInPlace
}

// PlaceMoved reports whether a rename moved the file since its last
// append in place: the new place must pass the protect rule first.
func (w *Write) PlaceMoved() bool { return w.moved }

// PlaceChecked: the new place passed.
func (w *Write) PlaceChecked() {
	w.step(EvPlaceChecked, nil, w.st)
	w.moved = false
}

// AppendedInPlace: n bytes of a write through h went into the file.
func (w *Write) AppendedInPlace(h *Handle, n int) {
	w.step(EvAppendedInPlace, h, w.st)
	if !h.routed {
		w.violated(EvAppendedInPlace, h, "no WriteRoute of the handle said RouteInPlace")
	}
	h.routed = false
	w.join(h)
	h.inPlace = true
	if n > 0 {
		w.appended = true
	}
}

// AppendsSynced: the appends in place were fsynced (or their fd closed).
func (w *Write) AppendsSynced() {
	w.step(EvAppendsSynced, nil, w.st)
	w.appended = false
}

// Appended reports whether appends in place wait for an fsync.
func (w *Write) Appended() bool { return w.appended }

// TempMade: the caller made the temp (seeded with the file, or empty for
// an O_TRUNC). Nothing in it is a change yet; made from a stale base, it
// is failed.
func (w *Write) TempMade() {
	next := w.st
	switch w.st {
	case Clean:
		next = Seeded
	case Stale:
		next = Failed
	}
	w.step(EvTempMade, nil, next)
	w.overwrites = false
}

// TempGone: the temp is gone (removed, committed, kept as a copy) with
// its changes and failure; it ends a commit in progress.
func (w *Write) TempGone() {
	next := Clean
	if w.st == Idle {
		next = Idle
	}
	w.step(EvTempGone, nil, next)
	w.end(committing)
	w.failed, w.wrote, w.changing = 0, false, false
}

// TempWrite: a write(2) through h is about to go into the temp (made),
// at its end if it appends.
func (w *Write) TempWrite(h *Handle, appends bool) {
	w.step(EvTempWrite, h, w.st)
	w.wrote = true
	w.overwrites = w.overwrites || !appends
	w.join(h)
}

// TempWritten: n bytes went into the temp; failed: the write failed or
// was short (its errno, EIO for a short one): the temp is never committed.
func (w *Write) TempWritten(n int, failed syscall.Errno) {
	w.step(EvTempWritten, nil, w.changed(n > 0, failed))
	if !w.wrote {
		w.violated(EvTempWritten, nil, "no TempWrite came before it")
	}
	w.wrote = false
}

// changed is the state a change of the temp leads to: changes (some
// bytes changed) make it pending, a failure failed.
func (w *Write) changed(changes bool, failed syscall.Errno) State {
	switch {
	case failed != 0:
		w.failed = failed
		return Failed
	case w.st == Failed || w.st == Idle:
		return w.st
	case w.st == Stale:
		if changes {
			return Failed
		}
		return w.st
	case changes:
		return Pending
	}
	return w.st
}

// Changing: a truncate or allocate through h begins: h is counted among
// the writers (even if the temp cannot be made).
func (w *Write) Changing(h *Handle) {
	w.step(EvChanging, h, w.st)
	w.join(h)
}

// TempChange: the temp (made) is about to be changed other than by an
// append at its end: its old bytes may be half rewritten.
func (w *Write) TempChange() {
	w.step(EvTempChange, nil, w.st)
	w.changing = true
	w.overwrites = true
}

// ChangeDone: the change ended with errno; ENOSPC, EIO and EDQUOT leave
// the temp failed, any other error left it as it was.
func (w *Write) ChangeDone(errno syscall.Errno) {
	var next State
	switch errno {
	case 0:
		next = w.changed(true, 0)
	case syscall.ENOSPC, syscall.EIO, syscall.EDQUOT:
		next = w.changed(false, errno)
	default:
		next = w.changed(false, 0)
	}
	w.step(EvChangeDone, nil, next)
	if !w.changing {
		w.violated(EvChangeDone, nil, "no TempChange came before it")
	}
	w.changing = false
}

// Fail marks the write failed with errno (a rebase after a conflict that
// could not reopen the file: the owner's next commit fails).
func (w *Write) Fail(errno syscall.Errno) {
	next := Failed
	switch w.st {
	case Idle, Stale:
		next = w.st
	case Clean:
		next = Stale
	}
	w.step(EvFail, nil, next)
	w.failed = errno
}

// --- commit ---

// Start is the first step of a commit.
type Start int

const (
	// StartNothing: nothing uncommitted; a durable commit fsyncs the
	// appends in place, if any.
	StartNothing Start = iota
	// StartSeal: seal the temp (fsync if durable), then look at the file
	// and ask Judge.
	StartSeal
	// StartRefuse: a write into the temp failed (Failure): the temp is
	// never committed, since it would replace the file with a partial
	// one; drop it (TempGone), EIO, WRITE_NOT_ATOMIC.
	StartRefuse
)

// Commit starts a commit (at a commit point); StartSeal and StartRefuse
// begin the committing exchange, which TempGone or Committed ends.
func (w *Write) Commit() Start {
	w.step(EvCommit, nil, w.st)
	switch w.st {
	case Pending:
		w.begin(committing, nil)
		return StartSeal
	case Failed:
		w.begin(committing, nil)
		w.ex[len(w.ex)-1].refused = true
		return StartRefuse
	}
	return StartNothing
}

// Name is what the file's name leads to at a commit.
type Name int

const (
	NameSame    Name = iota // the file observed: unchanged since the owner last saw it commit
	NameMissing             // nothing (unlinked behind the mount, or by another means)
	NameChanged             // another object, or the same one changed behind the mount
	NameUnknown             // the look failed
)

// Verdict is how a sealed commit ends.
type Verdict int

const (
	// DropGone: the owner removed the name through the mount; as natively
	// the bytes go with the old file: drop the temp.
	DropGone Verdict = iota
	// DropUnlinked: the name leads nowhere; the bytes go with the file.
	DropUnlinked
	// FailCommit: the look failed: drop the temp, EIO, WRITE_NOT_ATOMIC.
	FailCommit
	// Conflict: changed behind the mount: keep the temp as a conflict
	// copy beside the file, leave the file as it is, EBUSY.
	Conflict
	// CommitInPlace: the file has several links: copy the temp into it.
	CommitInPlace
	// CommitRename: rename the temp over the file (and move the lock).
	CommitRename
	// CommitPublish: the file is unpublished and its name free: rename
	// the temp to it, never over anything (RENAME_NOREPLACE).
	CommitPublish
)

// Judge: the sealed temp meets the file's name (what it leads to now, and
// its link count). The caller performs the verdict (and its last checks
// before a rename: the protect rule), then reports Committed or TempGone.
func (w *Write) Judge(now Name, links uint64) Verdict {
	w.step(EvJudge, nil, w.st)
	v := judge(w.gone, now, links)
	if w.unpublished {
		v = judgeNew(w.gone, now)
	}
	if x := w.within(committing); x != nil {
		if x.refused || x.verdict >= 0 {
			w.violated(EvJudge, nil, "the commit began refused, or was judged already")
		}
		x.verdict = v
	}
	return v
}

// judge is Judge's verdict: gone, the owner removed the name through the
// mount; now, what the name leads to; links, the file's link count.
func judge(gone bool, now Name, links uint64) Verdict {
	switch {
	case gone:
		return DropGone
	case now == NameMissing:
		return DropUnlinked
	case now == NameUnknown:
		return FailCommit
	case now == NameChanged:
		return Conflict
	case links > 1:
		return CommitInPlace
	}
	return CommitRename
}

// judgeNew is Judge's verdict for an unpublished file: its name is
// expected free; one the host made meanwhile keeps the bytes as a
// conflict copy, as a change behind the mount does.
func judgeNew(gone bool, now Name) Verdict {
	switch {
	case gone:
		return DropGone
	case now == NameMissing:
		return CommitPublish
	case now == NameUnknown:
		return FailCommit
	}
	return Conflict
}

// Committed: the temp is the file now (renamed over it, copied in, or
// published at the name).
func (w *Write) Committed() {
	x := w.within(committing)
	if x != nil && x.verdict != CommitRename && x.verdict != CommitInPlace && x.verdict != CommitPublish {
		w.violated(EvCommitted, nil, "no Judge of the commit said CommitRename, CommitInPlace or CommitPublish")
	}
	w.step(EvCommitted, nil, Clean)
	w.end(committing)
	w.failed, w.wrote, w.changing = 0, false, false
	w.unpublished = false
	// What the writers wrote is the file now: none of it is half written
	// in the temp for a close to wait for. A handle counts again once a
	// change comes through it.
	for _, x := range w.hs {
		w.leave(x)
	}
}

// MadeReal: something other than the write's own handles reached the
// unpublished file or its name, and the caller made the empty file at the
// name (as a create makes it) and moved the write onto it: the temp holds
// the owner's changes to it from here on, as any write's does.
func (w *Write) MadeReal() {
	w.step(EvMadeReal, nil, w.st)
	if !w.unpublished {
		w.violated(EvMadeReal, nil, "the file is published already")
	}
	w.unpublished = false
}

// --- close ---

// CloseMayCommit is the first step of a close of a descriptor (event
// FLUSH): only a close by the process that opened the handle (byOpener:
// the closing thread is one of its) may commit. A close by another
// process (a child closing an inherited descriptor at exec or exit) never
// does: the opener may be half way through its writes. It reads no
// state: the caller asks it before it takes the write's lock.
func CloseMayCommit(byOpener bool) bool { return byOpener }

// FlushStart: the opener closes one of h's descriptors. It reports
// whether there is anything the close could commit (changes, or h
// writing); if so the caller gathers FlushFacts and asks Flush.
//
// A close with nothing to commit is taken for the opener's last one
// without a scan (h is closing): a conflicting open waits for its RELEASE
// (Hold). If the opener still holds a descriptor, that open waits in vain
// until its bound and fails then, as it would have at once. That includes
// an editor's save (write, fsync, close): its fsync's commit took the
// handle out of the writers (Committed).
//
// A handle opened read-only (a reader that joined the owner's write) never
// commits at its close: it changed nothing, and its descriptors cannot be
// told apart from those of a plain reader of the file the opener may also
// hold (a reader opened before the write lives on another kernel inode,
// which a scan may or may not see). What is left uncommitted when the
// owner's writers have gone is committed by the owner's last RELEASE.
func (w *Write) FlushStart(h *Handle) bool {
	w.step(EvFlushStart, h, w.st)
	if !h.open.Write || !w.Dirty() && !h.writing {
		h.markClosing()
		return false
	}
	h.flushes++
	return true
}

// FlushFacts is what the caller knows of a close by h's opener.
type FlushFacts struct {
	// Unknown: what the closing thread still holds could not be told.
	Unknown bool
	// OthersOpen: the closing thread holds another descriptor that may be
	// of the same open (same access mode and O_APPEND; a reader is another
	// open and does not count).
	OthersOpen bool
	// WriteGoesOn: another thread's write(2) through the open is in flight.
	WriteGoesOn bool
	// Signal: the opener is exiting, killed by this signal (0: not killed).
	Signal int
}

// FlushAction is what a close does.
type FlushAction int

const (
	FlushNone FlushAction = iota
	// FlushCommit: commit now, close returns its error.
	FlushCommit
	// FlushKilled: the opener is killed: ask Killed.
	FlushKilled
)

// Flush decides a close by h's opener that FlushStart let through. It
// commits when that was the opener's last descriptor of the open, no
// write(2) through it is in flight, and no other process of the owner is
// writing the file (both write one temp: the other's last close commits).
//
// A (clean) close that finds no descriptor of the open left in the opener
// finds none of any other handle of the same opener and kind either (the
// scan cannot tell them apart): those have left too, and are closing. So
// `a = open(f, "r+"); b = open(f, "r+"); …; a.close(); b.close()` commits
// at b's close, though a's RELEASE may not have come yet.
func (w *Write) Flush(h *Handle, f FlushFacts) FlushAction {
	w.step(EvFlush, h, w.st)
	if h.flushes <= 0 {
		w.violated(EvFlush, h, "no FlushStart of the handle said true")
	}
	h.flushes--
	a := w.flush(h, f)
	if a == FlushKilled {
		w.begin(killing, h)
	}
	return a
}

// flush is Flush's decision.
func (w *Write) flush(h *Handle, f FlushFacts) FlushAction {
	if f.Unknown || f.OthersOpen {
		// Unknown: the last release, which always comes, commits.
		return FlushNone
	}
	if f.WriteGoesOn {
		// The RELEASE, after the write(2) returned, commits it whole.
		h.markClosing()
		return FlushNone
	}
	if f.Signal != 0 {
		// A killed opener's siblings stay as they are: the kill rule
		// (Killed) counts the handles that may still write.
		w.leave(h)
		h.markClosing()
		return FlushKilled
	}
	for _, x := range w.hs {
		if x == h || (x.open.Opener == h.open.Opener && x.open.Kind == h.open.Kind) {
			w.leave(x)
			x.markClosing()
		}
	}
	if w.writing > 0 {
		return FlushNone
	}
	return FlushCommit
}

// KillAction is what becomes of a killed writer's bytes.
type KillAction int

const (
	// KillNothing: another write handle shares the temp (its bytes cannot be
	// told apart: the owner's last close or release commits them all), or
	// nothing is uncommitted.
	KillNothing KillAction = iota
	// KillInFile: its appends went into the file in place: nothing to
	// commit, nothing torn; sync them, audit WRITER_KILLED_COMMITTED.
	KillInFile
	// KillCommit: committing tears nothing old (the file was empty, or
	// the handle only appended): commit, audit WRITER_KILLED_COMMITTED.
	KillCommit
	// KillRecover: keep the bytes as NAME.realm-recovered-TIME beside the
	// file, which stays as it was; audit WRITER_KILLED_RECOVERED.
	KillRecover
)

// Killed: h's opener is killed by a signal before it closed the file.
// Only handles that may write share the bytes: a reader of the owner held
// open beside the killed writer (tail -f) neither takes them over nor
// holds the kill rule back.
func (w *Write) Killed(h *Handle) KillAction {
	w.step(EvKilled, h, w.st)
	w.end(killing)
	sole, dirty := w.writeHandles() == 1, w.Dirty()
	switch {
	case sole && !dirty && h.inPlace:
		return KillInFile
	case !sole || !dirty:
		return KillNothing
	case w.st != Failed && (h.open.Fresh || h.open.Append && !h.open.Truncate && !w.overwrites):
		return KillCommit
	}
	return KillRecover
}

// KillAwaits reports whether the kill rule for h, whose opener a signal
// is killing, should first hear RELEASEs on their way: every other handle
// that may write is closing (its opener closed its last descriptor, so
// the kernel queued its RELEASE before this close), and until those land
// Killed would count them as sharing the bytes (KillNothing), where the
// processes say h's opener wrote them alone. The kernel queues the
// RELEASE first; the daemon serves requests concurrently and may serve it
// second. A closing handle whose RELEASE does not come (a forked child
// holds a descriptor of it) does share them: the caller waits for the
// releases up to a bound and asks Killed then. The caller holds the
// write's lock, and releases it while it waits.
func (w *Write) KillAwaits(h *Handle) bool {
	others := 0
	for _, x := range w.hs {
		if x == h || !x.open.Write {
			continue
		}
		if !x.closing {
			return false
		}
		others++
	}
	return others > 0
}

// writeHandles counts the open handles that may change the file.
func (w *Write) writeHandles() int {
	n := 0
	for _, x := range w.hs {
		if x.open.Write {
			n++
		}
	}
	return n
}

// --- the mount's own changes to the file ---

// Renamed: the mount renamed the file (the write follows it).
func (w *Write) Renamed() {
	w.step(EvRenamed, nil, w.st)
	w.moved = true
}

// Removed: the owner removed the file's name through the mount, or
// renamed another file over it.
func (w *Write) Removed() {
	w.step(EvRemoved, nil, w.st)
	w.gone = true
}

// TruncateCommits: a truncate(2) by name through a handle of its own
// commits, unless another write handle of the owner is open (it commits
// at its close).
func (w *Write) TruncateCommits() bool { return w.writing <= 1 }

func (a ReleaseAction) String() string {
	return [...]string{"none", "drop-truncate", "commit"}[a]
}

func (r Route) String() string { return [...]string{"temp", "in-place"}[r] }

func (v Verdict) String() string {
	if v < 0 {
		return "nothing"
	}
	return [...]string{"drop-gone", "drop-unlinked", "fail", "conflict", "commit-in-place", "commit-rename", "commit-publish"}[v]
}

func (s Start) String() string { return [...]string{"nothing", "seal", "refuse"}[s] }

func (a FlushAction) String() string { return [...]string{"none", "commit", "killed"}[a] }

func (k KillAction) String() string {
	if k < 0 {
		return "-"
	}
	return [...]string{"nothing", "in-file", "commit", "recover"}[k]
}
