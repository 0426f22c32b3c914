package undo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs/journal"
)

// rec is a record for Plan's tests: "A create f", "B rename d e", seq in
// order, done unless end says.
func recs(lines ...string) []journal.Record {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var out []journal.Record
	for i, l := range lines {
		f := strings.Fields(l)
		r := journal.Record{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Minute), Owner: f[0], Op: journal.Op(f[1]), Path: f[2], End: journal.Done}
		for _, x := range f[3:] {
			switch x {
			case "aborted":
				r.End = journal.Aborted
			case "open":
				r.End = ""
			default:
				r.To = x
			}
		}
		out = append(out, r)
	}
	return out
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recs      []string
		since     int // minutes after the first record
		undo      []uint64
		conflicts []string // path@seq
	}{{
		name: "only the owner's, newest first",
		recs: []string{"A create f", "A rewrite f", "A mkdir d", "A rename f d/g"},
		undo: []uint64{4, 3, 2, 1},
	}, {
		name: "another owner's earlier change is no conflict",
		recs: []string{"B rewrite f", "A rewrite f", "A chmod f"},
		undo: []uint64{3, 2},
	}, {
		name:      "another owner's later change of the path: the path is left, all of it",
		recs:      []string{"A rewrite f", "A rewrite g", "A chmod f", "B append f"},
		undo:      []uint64{2},
		conflicts: []string{"f@1"},
	}, {
		name:      "another owner moved a directory above the path",
		recs:      []string{"A rewrite d/f", "A rewrite g", "B rename d e"},
		undo:      []uint64{2},
		conflicts: []string{"d/f@1"},
	}, {
		name:      "a rename chains the paths it names",
		recs:      []string{"A rewrite a", "A rename a b", "A create c", "B rewrite b"},
		undo:      []uint64{3},
		conflicts: []string{"a@2", "b@2"},
	}, {
		name: "another owner's aborted change is none",
		recs: []string{"A rewrite f", "B rewrite f aborted"},
		undo: []uint64{1},
	}, {
		name:      "a change still in progress is left",
		recs:      []string{"A rewrite f", "A rewrite f open", "A create g"},
		undo:      []uint64{3},
		conflicts: []string{"f@2"},
	}, {
		name:  "since: only the window",
		recs:  []string{"A create f", "A create g", "A create h"},
		since: 1,
		undo:  []uint64{3, 2},
	}, {
		name:      "a file written in place keeps all the owner's changes to it",
		recs:      []string{"A create db", "A inplace db", "A create db-journal", "A inplace db-journal", "A unlink db-journal", "A create g"},
		undo:      []uint64{6},
		conflicts: []string{"db@2", "db-journal@4"},
	}, {
		name: "another owner's change beneath a directory the owner made is no conflict by the records",
		recs: []string{"A mkdir d", "B create d/x"},
		undo: []uint64{1}, // Run finds d not empty
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := recs(tc.recs...)
			w := Window{Owner: "A"}
			if tc.since > 0 {
				w.Since = rs[0].Time.Add(time.Duration(tc.since) * time.Minute)
			}
			undo, conflicts := Plan(rs, w)
			var got []uint64
			for _, r := range undo {
				got = append(got, r.Seq)
			}
			if !slices.Equal(got, tc.undo) {
				t.Errorf("undo %v, want %v", got, tc.undo)
			}
			var gotC []string
			for _, c := range conflicts {
				gotC = append(gotC, fmt.Sprintf("%s@%d", c.Path, c.Seq))
			}
			if !slices.Equal(gotC, tc.conflicts) {
				t.Errorf("conflicts %v, want %v (%v)", gotC, tc.conflicts, conflicts)
			}
		})
	}
}
