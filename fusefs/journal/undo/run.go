package undo

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// Store is what undo needs of an open journal (*journal.Journal): the
// records, and the journaled ways to change BACKING.
type Store interface {
	Records(journal.Filter) ([]journal.Record, error)
	Begin(rec journal.Record, keep int) (*journal.Change, error)
	Remove(rec journal.Record, dir int, name string) (uint64, error)
	Restore(rec journal.Record, seq uint64, keep int, dir int, name string) (uint64, error)
}

// Options are an undo's settings.
type Options struct {
	Window
	// By is the owner undo's own changes are recorded as (an undo can be
	// undone with --owner By); "" is "undo:" and the window's owner, its
	// records holding the incarnation undone (journal.Record.OwnerStart).
	By string
	// DryRun: plan and report, change nothing.
	DryRun bool
	// Lock, if set, runs each change's undo (the daemon: under its
	// namespace lock, so that no request sees half of one).
	Lock func(func() error) error
	// Held, if set, names the owner with the object id open for writing
	// (the daemon's lock table): undo leaves it alone rather than put a
	// version back under a write in progress.
	Held func(id journal.ID) (owner string, held bool)
}

// Step is one change undone.
type Step struct {
	Seq  uint64
	Op   journal.Op
	Path string
	To   string
	Done string // what undoing it did ("" in a dry run)
}

// Result is what an undo did: the changes undone, newest first, and the
// paths left alone.
type Result struct {
	Steps     []Step
	Conflicts []Conflict
}

// Run undoes the window's changes in BACKING (root, its root directory's
// fd), journaled in s. An error is the journal's (unreadable, or failing
// to record): what was undone before it is in the result.
func Run(root int, s Store, opts Options) (Result, error) {
	recs, err := s.Records(journal.Filter{})
	if err != nil {
		return Result{}, err
	}
	p, err := planOf(recs, opts.Window)
	if err != nil {
		return Result{}, err
	}
	res := Result{Conflicts: p.conflicts}
	byStart := ""
	if opts.By == "" {
		opts.By, byStart = "undo:"+p.me.owner, p.me.start
	}
	u := &undoer{root: root, s: s, by: opts.By, byStart: byStart, held: opts.Held, standIn: map[journal.ID]standIn{}, skipped: map[string]bool{},
		touched: map[journal.ID]time.Time{}}
	for _, c := range p.conflicts {
		u.skipped[c.Path] = true
	}
	for i := range p.undo {
		r := &p.undo[i]
		if anySkipped(u.skipped, namesOf(r)) {
			res.Conflicts = append(res.Conflicts, Conflict{Path: r.Path, Seq: r.Seq, Why: "a newer change of the owner's to it could not be undone"})
			continue
		}
		if opts.DryRun {
			res.Steps = append(res.Steps, Step{Seq: r.Seq, Op: r.Op, Path: r.Path, To: r.To})
			continue
		}
		var did string
		var why error
		run := func() error {
			pinned := u.pin(r)
			defer closeAll(pinned)
			if did, why, err = u.undo(r); err == nil && why == nil {
				u.touch(r, pinned)
			}
			return err
		}
		if opts.Lock != nil {
			err = opts.Lock(run)
		} else {
			err = run()
		}
		if err != nil {
			return res, fmt.Errorf("undoing change %d (%s %s): %w", r.Seq, r.Op, r.Path, err)
		}
		if why != nil {
			for _, n := range namesOf(r) {
				u.skipped[n] = true
			}
			res.Conflicts = append(res.Conflicts, Conflict{Path: r.Path, Seq: r.Seq, Why: why.Error()})
			continue
		}
		res.Steps = append(res.Steps, Step{Seq: r.Seq, Op: r.Op, Path: r.Path, To: r.To, Done: did})
	}
	return res, nil
}

func anySkipped(skipped map[string]bool, names []string) bool {
	for _, n := range names {
		if skipped[n] {
			return true
		}
	}
	return false
}

// undoer undoes one change at a time.
type undoer struct {
	root int
	s    Store
	by   string
	// byStart: the incarnation undone, which undo's records carry, so
	// that undoing the undo of one incarnation undoes no other's.
	byStart string
	held    func(journal.ID) (string, bool)
	// standIn: an object undo made anew for one the journal names (an
	// empty file or directory it could not keep): later checks take the
	// new one for the old, by its identity and its generation (the
	// filesystem may give it the old one's inode number).
	standIn map[journal.ID]standIn
	skipped map[string]bool
	// touched: the ctime each object undo changed was left with (since.go).
	touched map[journal.ID]time.Time
}

// errJournal marks an error of the journal's, which ends the undo; any
// other error of a change's undo is a conflict of its path.
type errJournal struct{ err error }

func (e errJournal) Error() string { return e.err.Error() }
func (e errJournal) Unwrap() error { return e.err }

// undo undoes r: what it did, or why its path is left alone (why), or an
// error of the journal's.
func (u *undoer) undo(r *journal.Record) (did string, why error, err error) {
	switch r.Op {
	case journal.OpCreate, journal.OpSymlink, journal.OpMknod:
		did, why = u.unmake(r, r.Path, r.After, journal.OpUnlink)
	case journal.OpMkdir:
		did, why = u.unmake(r, r.Path, r.After, journal.OpRmdir)
	case journal.OpLink:
		var id *journal.ID
		if r.Before != nil {
			v := r.Before.ID()
			id = &v
		}
		did, why = u.unmake(r, r.To, id, journal.OpUnlink)
	case journal.OpUnlink, journal.OpRmdir:
		did, why = u.unremove(r)
	case journal.OpRewrite, journal.OpTruncate:
		did, why = u.unrewrite(r)
	case journal.OpAppend:
		did, why = u.unappend(r)
	case journal.OpRename:
		did, why = u.unrename(r)
	case journal.OpChmod, journal.OpChown, journal.OpUtimens:
		did, why = u.unsetattr(r)
	case journal.OpInPlace: // Plan leaves the path alone
		why = fmt.Errorf("%s was written in place: not kept", r.Path)
	default:
		why = fmt.Errorf("undo does not know op %q", r.Op)
	}
	var je errJournal
	if errors.As(why, &je) {
		return "", nil, je.err
	}
	return did, why, nil
}

// standIn is an object undo made: its identity and generation (0: the
// filesystem keeps no birth time).
type standIn struct {
	id  journal.ID
	gen uint64
}

// want is the identity a check expects for id: its stand-in, if undo made
// one.
func (u *undoer) want(id journal.ID) journal.ID {
	if s, ok := u.standIn[id]; ok {
		return s.id
	}
	return id
}

// wantGen is the generation a check expects of the object b names (0: none
// to check): its stand-in's, if undo made one. A stand-in may have b's
// inode number (ext4 hands a freed number out again), so b's own
// generation would take undo's own object for another.
func (u *undoer) wantGen(b *journal.Object) uint64 {
	if s, ok := u.standIn[b.ID()]; ok {
		return s.gen
	}
	return b.Gen
}

// at opens the parent of path beneath the root: its fd (the caller's to
// close), the last name, and the object there (nil: none).
func (u *undoer) at(path string) (int, string, *journal.Object, error) {
	dir, name, err := dirfd.WalkParent(u.root, path)
	if err != nil {
		return -1, "", nil, fmt.Errorf("its directory: %w", err)
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return dir, name, nil, nil
		}
		dirfd.Close(dir)
		return -1, "", nil, err
	}
	obj := journal.ObjectOf(&st)
	obj.Gen = gen
	return dir, name, obj, nil
}

// holds checks that obj (at path) is the object id stands for.
func (u *undoer) holds(path string, obj *journal.Object, id journal.ID) error {
	if obj == nil {
		return fmt.Errorf("%s is gone: removed since, from outside the mount", path)
	}
	if obj.ID() != u.want(id) {
		return fmt.Errorf("%s is another object than the change left there: changed since, from outside the mount", path)
	}
	return u.free(path, obj)
}

// free checks that no owner has obj (at path) open for writing.
func (u *undoer) free(path string, obj *journal.Object) error {
	if u.held == nil {
		return nil
	}
	if owner, held := u.held(obj.ID()); held {
		return fmt.Errorf("%s is open for writing by %s: a write in progress", path, owner)
	}
	return nil
}

// record is the record of undo's change op to path.
func (u *undoer) record(op journal.Op, path string, before *journal.Object) journal.Record {
	return journal.Record{Owner: u.by, OwnerStart: u.byStart, Op: op, Path: path, Before: before}
}

// journaled marks err, a failure of the journal's, as one.
func journaled(err error) error {
	if err == nil {
		return nil
	}
	var errno unix.Errno
	if errors.As(err, &errno) || errors.Is(err, journal.ErrChanged) {
		return err // the change's own system call: a conflict of its path
	}
	return errJournal{err}
}

// timespecs are an object's times as utimensat takes them.
func timespecs(o *journal.Object) []unix.Timespec {
	return []unix.Timespec{unix.NsecToTimespec(o.Atime.UnixNano()), unix.NsecToTimespec(o.Mtime.UnixNano())}
}
