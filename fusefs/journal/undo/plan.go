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
)

// Window selects the changes to undo: those of Owner, made at or after
// Since (zero: all the journal holds).
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
	undo      []journal.Record
	conflicts []Conflict
}

// Plan decides, from the records (all of the journal's, oldest first),
// which of w's changes to undo, newest first, and which paths conflict: a
// path the owner changed that another owner's later change names (the
// same path, or a directory above it, moved or removed), and every other
// change of the owner's to such a path. A change still in progress (no
// end) conflicts too; an aborted one changed nothing.
func Plan(recs []journal.Record, w Window) ([]journal.Record, []Conflict) {
	p := planOf(recs, w)
	return p.undo, p.conflicts
}

func planOf(recs []journal.Record, w Window) plan {
	var mine []journal.Record
	first := uint64(0)
	for _, r := range recs {
		if r.Owner == w.Owner && !r.Time.Before(w.Since) && r.End != journal.Aborted {
			if first == 0 {
				first = r.Seq
			}
			mine = append(mine, r)
		}
	}
	var p plan
	if first == 0 {
		return p
	}
	later := othersOf(recs, w.Owner)
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
			block(r, fmt.Sprintf("changed by %s after it (change %d, %s %s)", o.Owner, o.Seq, o.Op, o.Path))
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
	return p
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

// others indexes the changes of owners other than one: for each path they
// name, their last change to it.
type others map[string]*journal.Record

func othersOf(recs []journal.Record, owner string) others {
	o := others{}
	for i := range recs {
		r := &recs[i]
		if r.Owner == owner || r.End == journal.Aborted {
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
