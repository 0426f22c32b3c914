package writeproto

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// fire calls the method of event ev on w with the arguments of variant v
// (events whose arguments choose the next state have several: variants).
func fire(w *Write, ev Event, h *Handle, v int) {
	switch ev {
	case EvOpen:
		w.Open(inPlace)
	case EvTruncated:
		w.Truncated(h)
	case EvRelease:
		w.Release(h, true)
	case EvReleased:
		w.Released(h)
	case EvWriteRoute:
		w.WriteRoute(h, true, false)
	case EvPlaceChecked:
		w.PlaceChecked()
	case EvAppendedInPlace:
		w.AppendedInPlace(h, 1)
	case EvAppendsSynced:
		w.AppendsSynced()
	case EvTempMade:
		w.TempMade()
	case EvTempGone:
		w.TempGone()
	case EvTempWrite:
		w.TempWrite(h, false)
	case EvTempWritten:
		w.TempWritten([]int{1, 0, 1}[v], []syscall.Errno{0, 0, syscall.ENOSPC}[v])
	case EvChanging:
		w.Changing(h)
	case EvTempChange:
		w.TempChange()
	case EvChangeDone:
		w.ChangeDone([]syscall.Errno{0, syscall.ENOSPC, syscall.EINVAL}[v])
	case EvFail:
		w.Fail(syscall.EIO)
	case EvCommit:
		w.Commit()
	case EvJudge:
		w.Judge(NameSame, 1)
	case EvCommitted:
		w.Committed()
	case EvFlushStart:
		w.FlushStart(h)
	case EvFlush:
		w.Flush(h, FlushFacts{OthersOpen: true})
	case EvKilled:
		w.Killed(h)
	case EvRenamed:
		w.Renamed()
	case EvRemoved:
		w.Removed()
	case EvMadeReal:
		w.MadeReal()
	default:
		panic("fire: " + ev.String())
	}
}

// variants is the number of argument variants fire has for ev.
func variants(ev Event) int {
	switch ev {
	case EvTempWritten, EvChangeDone:
		return 3
	}
	return 1
}

// inState makes a write in state st by a valid sequence, with handles
// open handles (the first a writer, the others readers; none if idle),
// and returns it and its first handle.
func inState(t *testing.T, st State, handles int) (*Write, *Handle) {
	t.Helper()
	w := &Write{}
	if st == Idle {
		return w, &Handle{w: w} // a handle no open made
	}
	h := w.Open(inPlace)
	for i := 1; i < handles; i++ {
		w.Open(reader)
	}
	switch st {
	case Seeded:
		w.TempMade()
	case Pending, Failed:
		w.TempMade()
		w.TempWrite(h, false)
		w.TempWritten(1, map[State]syscall.Errno{Failed: syscall.ENOSPC}[st])
	case Stale:
		w.Fail(syscall.EIO)
	}
	if w.st != st || w.Err() != nil {
		t.Fatalf("setting up %v: state %v, %v", st, w.st, w.Err())
	}
	return w, h
}

// ready gives w what event ev answers or comes within, so that only the
// state table decides whether ev is accepted.
func ready(w *Write, ev Event, h *Handle) {
	switch ev {
	case EvTruncated:
		w.begin(opening, h)
	case EvReleased:
		w.begin(releasing, h)
	case EvJudge:
		w.begin(committing, nil)
	case EvCommitted:
		w.begin(committing, nil)
		w.ex[0].verdict = CommitRename
	case EvKilled:
		w.begin(killing, h)
	case EvAppendedInPlace:
		h.routed = true
	case EvFlush:
		h.flushes = 1
	case EvMadeReal:
		w.unpublished = true
	case EvTempWritten:
		w.wrote = true
	case EvChangeDone:
		w.changing = true
	}
}

// TestStateTable: every declared (state, event) pair is accepted where it
// leads to a state declared and reported where not, every declared next
// state is reached by some arguments, and every undeclared pair is
// reported.
func TestStateTable(t *testing.T) {
	for st := Idle; int(st) < numRows; st++ {
		for ev := Event(0); ev < numEvents; ev++ {
			declared := accepts[ev][st]
			var reached stateSet
			for handles := 1; handles <= 2; handles++ {
				for v := 0; v < variants(ev); v++ {
					w, h := inState(t, st, handles)
					ready(w, ev, h)
					fire(w, ev, h, v)
					err := w.Err()
					if declared == 0 {
						if err == nil {
							t.Errorf("%v in %v (%d handles, variant %d): accepted; the table rejects it", ev, st, handles, v)
						}
						continue
					}
					// A next state the cell does not list is reported
					// too (the last Released with bytes uncommitted).
					if ok := declared.has(w.st); ok != (err == nil) {
						t.Errorf("%v in %v (%d handles, variant %d) to %v: %v", ev, st, handles, v, w.st, err)
					} else if ok {
						reached |= 1 << w.st
					}
				}
			}
			if declared != 0 && reached != declared {
				t.Errorf("%v in %v: reaches %v; the table declares %v", ev, st, reached, declared)
			}
		}
	}
}

// TestExchangeTable: within each exchange only the events it accepts and
// those that end it (for its own handle) are accepted; the events that
// come only within an exchange are reported outside one.
func TestExchangeTable(t *testing.T) {
	for kind := opening; kind <= killing; kind++ {
		d := exchanges[kind]
		for ev := Event(0); ev < numEvents; ev++ {
			st := acceptingState(ev)
			for _, own := range []bool{true, false} {
				w, h := inState(t, st, 2)
				other := w.hs[1]
				ready(w, ev, h)
				w.ex = nil
				x := h
				switch {
				case kind == committing:
					x = nil // a commit is of the write, not of a handle
				case !own:
					x = other
				}
				w.begin(kind, x)
				if kind == committing && ev == EvCommitted {
					w.ex[0].verdict = CommitRename
				}
				fire(w, ev, h, 0)
				want := contains(d.accepts, ev) || contains(d.ends, ev) && (own || kind == committing)
				if got := w.Err() == nil; got != want {
					t.Errorf("%v within %v (of its own handle %v) in %v: accepted %v, want %v (%v)", ev, kind, own, st, got, want, w.Err())
				}
			}
		}
	}
	for ev, kinds := range ending {
		w, h := inState(t, acceptingState(ev), 1)
		ready(w, ev, h)
		w.ex = nil
		fire(w, ev, h, 0)
		if w.Err() == nil {
			t.Errorf("%v outside any exchange (it comes within %v): accepted", ev, kinds)
		}
	}
}

// acceptingState is a state whose column accepts ev (pending first).
func acceptingState(ev Event) State {
	for _, st := range []State{Pending, Clean, Seeded, Failed, Stale, Idle} {
		if accepts[ev][st] != 0 {
			return st
		}
	}
	panic("no state accepts " + ev.String())
}

// TestAnswers: an event that answers another is reported without it.
func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   State
		ev   Event
	}{
		{"TempWritten without TempWrite", Pending, EvTempWritten},
		{"ChangeDone without TempChange", Pending, EvChangeDone},
		{"AppendedInPlace without WriteRoute in place", Clean, EvAppendedInPlace},
		{"Flush without FlushStart", Pending, EvFlush},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, h := inState(t, tc.st, 1)
			fire(w, tc.ev, h, 0)
			var v *Violation
			if !errors.As(w.Err(), &v) || v.Event != tc.ev || v.Handle != map[bool]int{true: 1}[tc.ev == EvAppendedInPlace || tc.ev == EvFlush] {
				t.Fatalf("Err = %v", w.Err())
			}
		})
	}
	t.Run("Committed after a conflict", func(t *testing.T) {
		w, _ := inState(t, Pending, 1)
		w.Commit()
		w.Judge(NameChanged, 1)
		w.Committed()
		if w.Err() == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("Judge of a refused commit", func(t *testing.T) {
		w, _ := inState(t, Failed, 1)
		if s := w.Commit(); s != StartRefuse {
			t.Fatalf("Commit of a failed temp: %v", s)
		}
		w.Judge(NameSame, 1)
		if w.Err() == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("an event on a released handle", func(t *testing.T) {
		w, h := inState(t, Clean, 2)
		w.Release(h, true)
		w.Released(h)
		w.WriteRoute(h, true, false)
		if !strings.Contains(errString(w.Err()), "not open") {
			t.Fatalf("Err = %v", w.Err())
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestOnViolation: the hook hears each violation as it comes, and Err
// keeps the first.
func TestOnViolation(t *testing.T) {
	var heard []error
	w := &Write{OnViolation: func(err error) { heard = append(heard, err) }}
	w.Commit() // idle
	h := w.Open(inPlace)
	w.Killed(h) // no Flush said FlushKilled
	if len(heard) != 2 || w.Err() != heard[0] {
		t.Fatalf("heard %v, Err %v", heard, w.Err())
	}
	if !strings.HasPrefix(w.Err().Error(), Marker+": Commit in state idle") {
		t.Errorf("Err = %q", w.Err())
	}
}

// TestDocTable: the table parses, and the package doc shows the table the
// machine checks.
func TestDocTable(t *testing.T) {
	if tableErr != nil {
		t.Fatal(tableErr)
	}
	for _, bad := range []string{"event idle\nOpen clean", strings.Replace(stateTable, "seeded  -", "seeded  x", 1),
		strings.Replace(stateTable, "\nOpen ", "\nOpened ", 1)} {
		if _, err := parseTable(bad); err == nil {
			t.Errorf("a malformed table parses:\n%s", bad)
		}
	}
	b, err := os.ReadFile("writeproto.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(string(b), "//\t", "")
	if !strings.Contains(doc, strings.TrimSpace(stateTable)) {
		t.Errorf("the package doc's state table is not stateTable:\n%s", stateTable)
	}
}
