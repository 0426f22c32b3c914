package undo

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/ownerarg"
)

// recs are records for Plan's tests: "A create f", "B rename d e", seq in
// order, done unless end says; an owner "session:7@S" is session:7's
// incarnation S (ownerarg.Split).
func recs(lines ...string) []journal.Record {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var out []journal.Record
	for i, l := range lines {
		f := strings.Fields(l)
		owner, start, _ := ownerarg.Split(f[0])
		r := journal.Record{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Minute), Owner: owner, OwnerStart: start,
			Op: journal.Op(f[1]), Path: f[2], End: journal.Done}
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
			undo, conflicts, err := Plan(rs, w)
			if err != nil {
				t.Fatal(err)
			}
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

// TestPlanIncarnations: session:7 named an agent's session (incarnation
// 100-b), then, its id given again, a person's (900-b). Plan never undoes
// the two together: the bare owner is refused while the window holds
// both, one named is undone alone, and the other's later change to one of
// its paths is a conflict as another owner's is.
func TestPlanIncarnations(t *testing.T) {
	agent := []string{
		"session:7@100-b create agent.txt",
		"session:7@100-b rewrite shared.txt",
		"session:7@100-b mkdir d",
		"session:7@900-b create person.txt",
		"session:7@900-b rewrite shared.txt",
		"session:7@900-b create d/p",
	}
	for _, tc := range []struct {
		name      string
		recs      []string
		owner     string
		since     int
		undo      []uint64
		conflicts []string
		refused   []string // the incarnations a refusal lists
	}{{
		name:    "the bare owner over two incarnations is refused",
		recs:    agent,
		owner:   "session:7",
		refused: []string{"100-b", "900-b"},
	}, {
		name:      "the older named: its own only, the newer's later change a conflict",
		recs:      agent,
		owner:     "session:7@100-b",
		undo:      []uint64{3, 1},
		conflicts: []string{"shared.txt@2"},
	}, {
		name:  "the newer named: its own only, the older's earlier change none",
		recs:  agent,
		owner: "session:7@900-b",
		undo:  []uint64{6, 5, 4},
	}, {
		name:  "a window holding one incarnation needs no name",
		recs:  agent,
		owner: "session:7",
		since: 3,
		undo:  []uint64{6, 5, 4},
	}, {
		name:    "records with no incarnation (older ones) are one more",
		recs:    []string{"session:7 create old.txt", "session:7@900-b create new.txt"},
		owner:   "session:7",
		refused: []string{"", "900-b"},
	}, {
		name:      "named by @-: those with none",
		recs:      []string{"session:7 create old.txt", "session:7@900-b rewrite old.txt", "session:7@900-b create new.txt"},
		owner:     "session:7@-",
		conflicts: []string{"old.txt@1"},
	}, {
		name:  "a pid owner as a session",
		recs:  []string{"pid:42@5 create a", "pid:42@77 create b"},
		owner: "pid:42@77",
		undo:  []uint64{2},
	}, {
		name:  "the undo of one incarnation, undone",
		recs:  []string{"session:7@100-b create a", "undo:session:7@100-b unlink a", "undo:session:7@900-b unlink b"},
		owner: "undo:session:7@100-b",
		undo:  []uint64{2},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := recs(tc.recs...)
			w := Window{Owner: tc.owner}
			if tc.since > 0 {
				w.Since = rs[0].Time.Add(time.Duration(tc.since) * time.Minute)
			}
			undo, conflicts, err := Plan(rs, w)
			var inc *Incarnations
			if errors.As(err, &inc) {
				var starts []string
				for _, s := range inc.Starts {
					starts = append(starts, s.Start)
				}
				if !slices.Equal(starts, tc.refused) || len(undo) > 0 {
					t.Errorf("refused listing %v, undoing %d; want %v, none", starts, len(undo), tc.refused)
				}
				for _, s := range tc.refused {
					if want := ownerarg.Join(inc.Owner, s); !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal does not name %s: %v", want, err)
					}
				}
				return
			}
			if err != nil || tc.refused != nil {
				t.Fatalf("err %v, want a refusal listing %v", err, tc.refused)
			}
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
