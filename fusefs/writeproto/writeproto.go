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
// The states of one Write (docs/ARCHITECTURE.md draws them):
//
//   - Idle: no handle.
//   - Clean: handles, nothing uncommitted. Appends in place (O_APPEND
//     without O_TRUNC) leave the write here: they went into the file.
//   - Seeded: a temp, no change in it yet.
//   - Pending: a temp with changes; the next commit point renames it over
//     the file (or copies it in, for a file with several links).
//   - Failed: a write into the temp failed; the temp is never committed.
//   - Gone: the owner removed the file's name through the mount (or renamed
//     another file over it): the bytes go with the old file, as natively.
//
// The commit points: the opener's last FLUSH of a writing handle (close
// returns the commit's error), fsync(2), a truncate(2) by name, and the
// owner's last RELEASE (what is left).
package writeproto

import (
	"slices"
	"syscall"
)

// State names the state of a Write.
type State int

const (
	Idle State = iota
	Clean
	Seeded
	Pending
	Failed
	Gone
)

func (s State) String() string {
	return [...]string{"idle", "clean", "seeded", "pending", "failed", "gone"}[s]
}

// Open is how a handle was opened.
type Open struct {
	Write    bool // it may change the file (write access, O_TRUNC or O_APPEND)
	Append   bool // O_APPEND (which makes Write)
	Truncate bool // O_TRUNC (which makes Write)
	// Fresh: the file was empty, as the owner saw it, at the open (before
	// its O_TRUNC): a writer killed through it tears nothing old.
	Fresh bool
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
	// changed: a write or truncate came through it; inPlace: an append
	// through it went into the file; writing: it changed the file (or
	// opened it O_TRUNC) and its opener still holds a descriptor of it:
	// counted in Write.writing.
	changed, inPlace, writing bool
	// closing: its opener holds no descriptor of it, as far as the daemon
	// can tell; Hold was told.
	closing bool
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

// Writing reports whether h is counted among the write's writers.
func (h *Handle) Writing() bool { return h.writing }

// Write is one owner's write in progress on one file.
type Write struct {
	hs      []*Handle // the open handles sharing it, readers too
	writing int       // of those, write handles whose opener still holds a descriptor
	temp    bool
	dirty   bool          // the temp holds changes not yet committed
	failed  syscall.Errno // a write into the temp failed: it must not be committed
	// overwrites: the temp holds a change other than an append at its
	// end: its old bytes may be half rewritten.
	overwrites bool
	appended   bool // appends in place not yet fsynced
	gone       bool
	// moved: a rename gave the file a new place since its last append in
	// place, which must pass the protect rule before the next one lands.
	moved bool
}

// State is w's state.
func (w *Write) State() State {
	switch {
	case len(w.hs) <= 0:
		return Idle
	case w.gone:
		return Gone
	case w.failed != 0:
		return Failed
	case w.dirty:
		return Pending
	case w.temp:
		return Seeded
	}
	return Clean
}

// Handles is the number of open handles.
func (w *Write) Handles() int { return len(w.hs) }

// Writers is the number of handles whose opener is still writing.
func (w *Write) Writers() int { return w.writing }

// HasTemp reports whether w has a temp.
func (w *Write) HasTemp() bool { return w.temp }

// Dirty reports whether the temp holds uncommitted changes.
func (w *Write) Dirty() bool { return w.dirty }

// IsGone reports whether the owner removed the file's name through the mount.
func (w *Write) IsGone() bool { return w.gone }

// Failure is the error of a write into the temp that failed, 0 if none.
func (w *Write) Failure() syscall.Errno { return w.failed }

// --- open and release ---

// Open: the owner opens the file (event OPEN). A handle that truncates
// asks the caller to drop any temp and make an empty one (TempMade), then
// Truncated; if that fails, Released.
func (w *Write) Open(o Open) *Handle {
	h := &Handle{open: o}
	w.hs = append(w.hs, h)
	return h
}

// Truncated: h's O_TRUNC made the temp empty: a change, and h's opener
// writes from here on.
func (w *Write) Truncated(h *Handle) {
	w.dirty, w.overwrites = true, true
	h.writing = true
	w.writing++
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
// (FLUSH) before. The caller performs the action, then Released.
func (w *Write) Release(h *Handle, flushed bool) ReleaseAction {
	w.leave(h)
	switch {
	case len(w.hs) != 1:
		return ReleaseNone
	case !flushed && h.open.Truncate && !h.changed:
		return ReleaseDropTruncate
	}
	return ReleaseCommit
}

// Released drops h from the count; last: it was the owner's last handle,
// and the write ends (the caller closes its temp, fds and lease).
func (w *Write) Released(h *Handle) (last bool) {
	w.leave(h)
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
	if !appends || h.open.Truncate || w.temp || w.failed != 0 || setID {
		return RouteTemp
	}
	return RouteInPlace
}

// PlaceMoved reports whether a rename moved the file since its last
// append in place: the new place must pass the protect rule first.
func (w *Write) PlaceMoved() bool { return w.moved }

// PlaceChecked: the new place passed.
func (w *Write) PlaceChecked() { w.moved = false }

// AppendedInPlace: n bytes of a write through h went into the file.
func (w *Write) AppendedInPlace(h *Handle, n int) {
	w.join(h)
	h.inPlace = true
	if n > 0 {
		w.appended = true
	}
}

// AppendsSynced: the appends in place were fsynced (or their fd closed).
func (w *Write) AppendsSynced() { w.appended = false }

// Appended reports whether appends in place wait for an fsync.
func (w *Write) Appended() bool { return w.appended }

// TempMade: the caller made the temp (seeded with the file, or empty for
// an O_TRUNC). Nothing in it is a change yet.
func (w *Write) TempMade() {
	w.temp, w.overwrites = true, false
}

// TempGone: the temp is gone (removed, committed, kept as a copy) with
// its changes and failure.
func (w *Write) TempGone() {
	w.temp, w.dirty, w.failed = false, false, 0
}

// TempWrite: a write(2) through h is about to go into the temp (made),
// at its end if it appends.
func (w *Write) TempWrite(h *Handle, appends bool) {
	w.overwrites = w.overwrites || !appends
	w.join(h)
}

// TempWritten: n bytes went into the temp; failed: the write failed or
// was short (its errno, EIO for a short one): the temp is never committed.
func (w *Write) TempWritten(n int, failed syscall.Errno) {
	if n > 0 {
		w.dirty = true
	}
	if failed != 0 {
		w.dirty, w.failed = true, failed
	}
}

// Changing: a truncate or allocate through h begins: h is counted among
// the writers (even if the temp cannot be made).
func (w *Write) Changing(h *Handle) { w.join(h) }

// TempChange: the temp (made) is about to be changed other than by an
// append at its end: its old bytes may be half rewritten.
func (w *Write) TempChange() { w.overwrites = true }

// ChangeDone: the change ended with errno; ENOSPC, EIO and EDQUOT leave
// the temp failed, any other error left it as it was.
func (w *Write) ChangeDone(errno syscall.Errno) {
	switch errno {
	case 0:
		w.dirty = true
	case syscall.ENOSPC, syscall.EIO, syscall.EDQUOT:
		w.dirty, w.failed = true, errno
	}
}

// Fail marks the write failed with errno (a rebase after a conflict that
// could not reopen the file: the owner's next commit fails).
func (w *Write) Fail(errno syscall.Errno) { w.failed = errno }

// --- commit ---

// Start is the first step of a commit.
type Start int

const (
	// StartNothing: nothing uncommitted; a durable commit fsyncs the
	// appends in place, if any.
	StartNothing Start = iota
	// StartSeal: seal the temp (refuse a failed one, fsync if durable),
	// then look at the file and ask Judge.
	StartSeal
)

// Commit starts a commit (at a commit point).
func (w *Write) Commit() Start {
	if !w.dirty {
		return StartNothing
	}
	return StartSeal
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
)

// Judge: the sealed temp meets the file's name (what it leads to now, and
// its link count). The caller performs the verdict (and its last checks
// before a rename: the protect rule), then reports Committed or TempGone.
func (w *Write) Judge(now Name, links uint64) Verdict {
	switch {
	case w.gone:
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

// Committed: the temp is the file now (renamed over it, or copied in).
func (w *Write) Committed() { w.TempGone() }

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
// until its bound and fails then, as it would have at once.
//
// A handle opened read-only (a reader that joined the owner's write) never
// commits at its close: it changed nothing, and its descriptors cannot be
// told apart from those of a plain reader of the file the opener may also
// hold (a reader opened before the write lives on another kernel inode,
// which a scan may or may not see). What is left uncommitted when the
// owner's writers have gone is committed by the owner's last RELEASE.
func (w *Write) FlushStart(h *Handle) bool {
	if !h.open.Write || !w.dirty && !h.writing {
		h.markClosing()
		return false
	}
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
	sole := w.writeHandles() == 1
	switch {
	case sole && !w.dirty && h.inPlace:
		return KillInFile
	case !sole || !w.dirty:
		return KillNothing
	case w.failed == 0 && (h.open.Fresh || h.open.Append && !h.open.Truncate && !w.overwrites):
		return KillCommit
	}
	return KillRecover
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
func (w *Write) Renamed() { w.moved = true }

// Removed: the owner removed the file's name through the mount, or
// renamed another file over it.
func (w *Write) Removed() { w.gone = true }

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
	return [...]string{"drop-gone", "drop-unlinked", "fail", "conflict", "commit-in-place", "commit-rename"}[v]
}

func (a FlushAction) String() string { return [...]string{"none", "commit", "killed"}[a] }

func (k KillAction) String() string {
	if k < 0 {
		return "-"
	}
	return [...]string{"nothing", "in-file", "commit", "recover"}[k]
}
