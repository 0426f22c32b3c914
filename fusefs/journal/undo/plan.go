// Package undo puts an owner's changes back (issue 30; docs/JOURNAL.md,
// Undo): every path the owner changed in a window of the journal returns
// to what it was before the owner's first change in it, newest change
// first, each change undone by its inverse, itself journaled (so that an
// undo can be undone). A path another owner changed after the owner is
// left alone and reported as a conflict, and so is a path whose object is
// not the one the journal says the change left there (a change from
// outside the mount since).
//
// The plan (Plan) is pure: which changes to undo and which conflict, from
// the records alone. Run then undoes each planned change against BACKING,
// beneath its root fd, checking each object's identity before it touches
// it; every system call goes through fusefs/dirfd or the journal.
package undo

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/ownerarg"
)

// Window selects the changes to undo: those of Owner, made at or after
// Since (zero: all the journal holds).
//
// Owner is as the records write it, or OWNER@INCARNATION
// (ownerarg.Split) for one incarnation of a session:N or pid:N owner:
// one pid names several owners over time, and Plan never undoes two of
// them together (Incarnations).
type Window struct {
	Owner string
	Since time.Time
}

// Conflict is a path undo leaves as it is, and why.
type Conflict struct {
	Path string
	Seq  uint64 // the owner's change that was not undone
	Why  string
}

func (c Conflict) String() string { return fmt.Sprintf("%s: %s (change %d)", c.Path, c.Why, c.Seq) }

// plan is what Plan decided: the owner's changes to undo, newest first,
// and the conflicts.
type plan struct {
	me        self // the owner undone, and its incarnation
	undo      []journal.Record
	conflicts []Conflict
}

// Plan decides, from the records (all of the journal's, oldest first),
// which of w's changes to undo, newest first, and which paths conflict: a
// path the owner changed that another owner's later change names (the
// same path, or a directory above it, moved or removed), and every other
// change of the owner's to such a path. A change still in progress (no
// end) conflicts too; an aborted one changed nothing.
//
// Another incarnation of the owner (Window) is another owner: its later
// changes conflict as anyone's. A window holding the changes of more than
// one incarnation of w.Owner, none named, is refused (*Incarnations):
// nothing is undone.
func Plan(recs []journal.Record, w Window) ([]journal.Record, []Conflict, error) {
	p, err := planOf(recs, w)
	return p.undo, p.conflicts, err
}

// self is the owner a plan undoes: an owner string and one incarnation of
// it.
type self struct{ owner, start string }

func (s self) is(r *journal.Record) bool { return r.Owner == s.owner && r.OwnerStart == s.start }

// whose picks, of the window's changes (not aborted) of w's owner, those
// of one incarnation: the one w names, else the only one there is.
func whose(recs []journal.Record, w Window) (self, []journal.Record, error) {
	owner, start, pinned := ownerarg.Split(w.Owner)
	var mine []journal.Record
	var seen *Incarnations
	for _, r := range recs {
		if r.Owner != owner || r.Time.Before(w.Since) || r.End == journal.Aborted {
			continue
		}
		if !pinned {
			seen = seen.add(owner, &r)
			start = r.OwnerStart
		}
		if r.OwnerStart == start {
			mine = append(mine, r)
		}
	}
	if seen != nil && len(seen.Starts) > 1 {
		return self{}, nil, seen
	}
	return self{owner, start}, mine, nil
}

func planOf(recs []journal.Record, w Window) (plan, error) {
	me, mine, err := whose(recs, w)
	p := plan{me: me}
	if err != nil || len(mine) == 0 {
		return p, err
	}
	later := othersOf(recs, me)
	blocked := map[string]Conflict{} // a path left alone → the first reason found
	block := func(r *journal.Record, why string) {
		for _, n := range namesOf(r) {
			if _, ok := blocked[n]; !ok {
				blocked[n] = Conflict{Path: n, Seq: r.Seq, Why: why}
			}
		}
	}
	for i := range mine {
		r := &mine[i]
		if r.End == "" {
			block(r, "the change is still in progress")
			continue
		}
		if r.Op == journal.OpInPlace {
			// Its writes are not kept: every change of the owner's to
			// the path stays, so that the file (SQLite's database, its
			// journal) is as its program left it, never half put back.
			block(r, r.Path+" was written in place (a coordinated file, as SQLite's are): what its writers changed is not kept")
			continue
		}
		if o := later.laterThan(r); o != nil {
			block(r, fmt.Sprintf("changed by %s after it (change %d, %s %s)", me.name(o), o.Seq, o.Op, o.Path))
		}
	}
	// A path left alone keeps every change of the owner's to it: undoing
	// some would leave it in a state it never had. Renames chain paths,
	// so the blocking spreads until nothing more joins.
	for grew := true; grew; {
		grew = false
		for i := range mine {
			r := &mine[i]
			names := namesOf(r)
			for _, n := range names {
				c, ok := blocked[n]
				if !ok {
					continue
				}
				for _, m := range names {
					if _, ok := blocked[m]; !ok {
						blocked[m] = Conflict{Path: m, Seq: r.Seq, Why: "a change of the same owner to it or beside it conflicts: " + c.Why}
						grew = true
					}
				}
				break
			}
		}
	}
	for i := len(mine) - 1; i >= 0; i-- {
		r := mine[i]
		if !anyBlocked(blocked, namesOf(&r)) {
			p.undo = append(p.undo, r)
		}
	}
	for _, c := range blocked {
		p.conflicts = append(p.conflicts, c)
	}
	slices.SortFunc(p.conflicts, func(a, b Conflict) int { return strings.Compare(a.Path, b.Path) })
	return p, nil
}

// name is how a conflict names the owner of o: as the records write it,
// with its incarnation where it is another of the undone owner's.
func (s self) name(o *journal.Record) string {
	if o.Owner != s.owner {
		return o.Owner
	}
	return ownerarg.Join(o.Owner, o.OwnerStart) + " (another incarnation of " + o.Owner + ": its id given again)"
}

// Incarnations refuses an undo whose window holds the changes of more
// than one incarnation of its owner (journal.Record.OwnerStart): one
// session or process id named an agent's session, then a person's.
// Undoing the newest would be the wrong guess in the very case this is
// for (the owner to undo is the one that ended; the id went to whoever
// came next), so none is undone until one is named: --owner OWNER@START.
type Incarnations struct {
	Owner  string
	Starts []Incarnation // oldest first
}

// Incarnation is one incarnation's changes in the window.
type Incarnation struct {
	Start       string // "" where its records hold none
	Changes     int
	First, Last time.Time
}

// add counts r, a change of owner, in i (nil: a new one).
func (i *Incarnations) add(owner string, r *journal.Record) *Incarnations {
	if i == nil {
		i = &Incarnations{Owner: owner}
	}
	for k := range i.Starts {
		if s := &i.Starts[k]; s.Start == r.OwnerStart {
			s.Changes++
			s.Last = r.Time
			return i
		}
	}
	i.Starts = append(i.Starts, Incarnation{Start: r.OwnerStart, Changes: 1, First: r.Time, Last: r.Time})
	return i
}

func (i *Incarnations) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s names %d owners in the window, one after another (its id was given again to a new session or process): ", i.Owner, len(i.Starts))
	for k, s := range i.Starts {
		if k > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s, %d changes from %s to %s", ownerarg.Join(i.Owner, s.Start), s.Changes,
			s.First.UTC().Format(time.RFC3339), s.Last.UTC().Format(time.RFC3339))
		if s.Start == "" {
			b.WriteString(" (no incarnation recorded)")
		}
	}
	last := i.Starts[len(i.Starts)-1]
	fmt.Fprintf(&b, ". Nothing was undone: name one, as --owner %s (realmfs journal list shows each change's)", ownerarg.Join(i.Owner, last.Start))
	return b.String()
}

// namesOf is the workspace paths a change names.
func namesOf(r *journal.Record) []string {
	if r.To != "" {
		return []string{r.Path, r.To}
	}
	return []string{r.Path}
}

func anyBlocked(blocked map[string]Conflict, names []string) bool {
	for _, n := range names {
		if _, ok := blocked[n]; ok {
			return true
		}
	}
	return false
}

// others indexes the changes of owners other than one (another
// incarnation of its owner string is another): for each path they name,
// their last change to it.
type others map[string]*journal.Record

func othersOf(recs []journal.Record, me self) others {
	o := others{}
	for i := range recs {
		r := &recs[i]
		if me.is(r) || r.End == journal.Aborted {
			continue
		}
		for _, n := range namesOf(r) {
			o[n] = r
		}
	}
	return o
}

// laterThan is a change in o after r that names one of r's paths or a
// directory above one (nil: none).
func (o others) laterThan(r *journal.Record) *journal.Record {
	for _, n := range namesOf(r) {
		for at := len(n); at > 0; at = strings.LastIndexByte(n[:at], '/') {
			if c := o[n[:at]]; c != nil && c.Seq > r.Seq {
				return c
			}
		}
	}
	return nil
}
