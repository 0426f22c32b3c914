package writeproto

import (
	"fmt"
	"strings"
)

// Event names a call of the machine by the caller: one of Write's event
// methods, named as the method is.
type Event int

const (
	EvOpen Event = iota
	EvTruncated
	EvRelease
	EvReleased
	EvWriteRoute
	EvPlaceChecked
	EvAppendedInPlace
	EvAppendsSynced
	EvTempMade
	EvTempGone
	EvTempWrite
	EvTempWritten
	EvChanging
	EvTempChange
	EvChangeDone
	EvFail
	EvCommit
	EvJudge
	EvCommitted
	EvFlushStart
	EvFlush
	EvKilled
	EvRenamed
	EvRemoved
	EvMadeReal
	numEvents
)

var eventNames = [numEvents]string{"Open", "Truncated", "Release", "Released", "WriteRoute",
	"PlaceChecked", "AppendedInPlace", "AppendsSynced", "TempMade", "TempGone", "TempWrite",
	"TempWritten", "Changing", "TempChange", "ChangeDone", "Fail", "Commit", "Judge",
	"Committed", "FlushStart", "Flush", "Killed", "Renamed", "Removed", "MadeReal"}

func (e Event) String() string {
	if e < 0 || e >= numEvents {
		return fmt.Sprintf("Event(%d)", int(e))
	}
	return eventNames[e]
}

// numRows is the number of states with a row in the table: Gone is a
// mark over one of them, not a row.
const numRows = int(Stale) + 1

// stateTable is the table of the package doc, which a test keeps equal to
// it: for each event (a line) and state (a column), "-" rejects the event
// there, "=" accepts it and leaves the state as it was, a state's name is
// the state it leads to, and "a|b" lists the states it may lead to (the
// event's arguments choose).
const stateTable = `
event           idle   clean   seeded           pending         failed  stale
Open            clean  =       =                =               =       =
Truncated       -      -       pending          -               -       -
Release         -      =       =                =               =       =
Released        -      =|idle  =|idle           =               =       =|idle
WriteRoute      -      =       =                =               =       =
PlaceChecked    -      =       =                =               =       =
AppendedInPlace -      =       -                -               -       -
AppendsSynced   =      =       =                =               =       =
TempMade        -      seeded  -                -               -       failed
TempGone        =      =       clean            clean           clean   clean
TempWrite       -      -       =                =               =       -
TempWritten     -      -       =|pending|failed =|failed        =       -
Changing        -      =       =                =               =       =
TempChange      -      -       =                =               =       -
ChangeDone      -      -       =|pending|failed =|failed        =       -
Fail            -      stale   -                -               -       -
Commit          -      =       =                =               =       =
Judge           -      -       -                =               -       -
Committed       -      -       -                clean           -       -
FlushStart      -      =       =                =               =       =
Flush           -      =       =                =               =       =
Killed          -      =       =                =               =       =
Renamed         -      =       =                =               =       =
Removed         -      =       =                =               =       =
MadeReal        -      =       =                =               =       =
`

// stateSet is a set of states, one bit each.
type stateSet uint16

func (s stateSet) has(st State) bool { return s&(1<<st) != 0 }

func (s stateSet) String() string {
	var names []string
	for st := Idle; int(st) < numRows; st++ {
		if s.has(st) {
			names = append(names, st.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// accepts[ev][st]: the states event ev may lead to from st; empty: ev is
// rejected in st. Parsed from stateTable once; a malformed table is the
// package's own bug (tableErr, which its tests fail on), and leaves every
// event rejected: a daemon built with it logs each write's first event.
var accepts, tableErr = parseTable(stateTable)

// parseTable reads a table laid out as stateTable.
func parseTable(text string) (t [numEvents][numRows]stateSet, err error) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	head := strings.Fields(lines[0])
	if len(head) != numRows+1 || len(lines)-1 != int(numEvents) {
		return t, fmt.Errorf("the state table's shape is not states × events")
	}
	for i, name := range head[1:] {
		if name != State(i).String() {
			return t, fmt.Errorf("state table column %s out of order", name)
		}
	}
	for i, line := range lines[1:] {
		cells := strings.Fields(line)
		if len(cells) != numRows+1 || cells[0] != Event(i).String() {
			return [numEvents][numRows]stateSet{}, fmt.Errorf("state table line %q", line)
		}
		for st, cell := range cells[1:] {
			if t[i][st], err = parseCell(cell, State(st)); err != nil {
				return [numEvents][numRows]stateSet{}, err
			}
		}
	}
	return t, nil
}

// parseCell reads one cell of the table, in the column of from.
func parseCell(cell string, from State) (stateSet, error) {
	var s stateSet
	if cell == "-" {
		return 0, nil
	}
	for _, name := range strings.Split(cell, "|") {
		to, ok := stateNamed(name, from)
		if !ok {
			return 0, fmt.Errorf("state table cell %q", cell)
		}
		s |= 1 << to
	}
	return s, nil
}

// stateNamed is the state a cell names ("=": from).
func stateNamed(name string, from State) (State, bool) {
	if name == "=" {
		return from, true
	}
	for st := Idle; int(st) < numRows; st++ {
		if st.String() == name {
			return st, true
		}
	}
	return 0, false
}

// An exchange is a run of calls the caller makes under one hold of the
// write's lock, begun by one event and ended by another; in between, only
// the events it accepts may come (the exchange table of the package doc).
type exchange struct {
	kind exchangeKind
	h    *Handle // the handle it is of (opening, releasing, killing)
	// committing: the verdict Judge gave (-1: none yet); refused: the
	// commit began with StartRefuse, and no Judge may come.
	verdict Verdict
	refused bool
}

type exchangeKind int

const (
	opening exchangeKind = iota
	releasing
	committing
	killing
)

func (k exchangeKind) String() string {
	return [...]string{"opening", "releasing", "committing", "killing"}[k]
}

// exchanges declares what each exchange accepts and what ends it. Commit
// inside releasing begins a committing exchange within it.
var exchanges = [...]struct{ accepts, ends []Event }{
	opening:    {[]Event{EvTempGone, EvTempMade, EvAppendsSynced}, []Event{EvTruncated, EvReleased}},
	releasing:  {[]Event{EvTempGone, EvAppendsSynced, EvFail, EvCommit}, []Event{EvReleased}},
	committing: {[]Event{EvJudge, EvAppendsSynced}, []Event{EvTempGone, EvCommitted}},
	killing:    {nil, []Event{EvKilled}},
}

// ending lists the events that come only to end an exchange (and which
// exchanges they end); any other event is accepted outside exchanges.
var ending = map[Event][]exchangeKind{
	EvTruncated: {opening},
	EvReleased:  {opening, releasing},
	EvJudge:     {committing}, // it ends nothing, but comes only within a commit
	EvCommitted: {committing},
	EvKilled:    {killing},
}

// Violation is an event that came where the machine does not accept it:
// the caller's bug, never the kernel's or a process's.
type Violation struct {
	Event  Event
	State  State  // the write's state when it came (its line in the table)
	Handle int    // the handle it named (1 for the write's first), 0: none
	Within string // the exchange in progress, "" none
	Why    string
}

// Marker begins every Violation's text: the daemon log's line of one, which
// the e2e harness looks for.
const Marker = "write protocol violation"

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s in state %s", Marker, v.Event, v.State)
	if v.Handle != 0 {
		fmt.Fprintf(&b, " (handle %d)", v.Handle)
	}
	if v.Within != "" {
		fmt.Fprintf(&b, " within %s", v.Within)
	}
	return b.String() + ": " + v.Why
}

// Err is the first event w did not accept, nil if none: a caller (or a
// test) asks it where the write ends.
func (w *Write) Err() error {
	if w.err == nil {
		return nil
	}
	return w.err
}

// violated records a violation: the first is kept (Err), and each is told
// to OnViolation. The event still does what it would: a daemon must not
// stop serving for its own bug, and the log says so.
func (w *Write) violated(ev Event, h *Handle, why string) {
	v := &Violation{Event: ev, State: w.st, Why: why}
	if h != nil {
		v.Handle = h.id
	}
	if n := len(w.ex); n > 0 {
		v.Within = w.ex[n-1].kind.String()
	}
	if w.err == nil {
		w.err = v
	}
	if w.OnViolation != nil {
		w.OnViolation(v)
	}
}

// step checks event ev (naming handle h, if any) against the table and the
// exchange in progress, then moves w to next, which the event's method
// chose from its arguments.
func (w *Write) step(ev Event, h *Handle, next State) {
	switch ok := accepts[ev][w.st]; {
	case ok == 0:
		w.violated(ev, h, "the state does not accept it")
	case !ok.has(next):
		w.violated(ev, h, fmt.Sprintf("it leads to %s, where the table allows %s", next, ok))
	}
	if h != nil && (h.w != w || !h.live) {
		w.violated(ev, h, "the handle is not open in this write")
	}
	w.checkExchange(ev, h)
	w.st = next
}

// checkExchange checks ev against the exchange in progress, if any, or
// that an event that comes only within one has its exchange.
func (w *Write) checkExchange(ev Event, h *Handle) {
	n := len(w.ex)
	if n == 0 {
		if _, only := ending[ev]; only {
			w.violated(ev, h, "it comes only within an exchange, and none is in progress")
		}
		return
	}
	x := w.ex[n-1]
	d := exchanges[x.kind]
	switch {
	case contains(d.ends, ev):
		if x.h != nil && x.h != h {
			w.violated(ev, h, fmt.Sprintf("it ends the %s of another handle (%d)", x.kind, x.h.id))
		}
	case !contains(d.accepts, ev):
		w.violated(ev, h, "the exchange in progress does not accept it")
	}
}

func contains(evs []Event, ev Event) bool {
	for _, e := range evs {
		if e == ev {
			return true
		}
	}
	return false
}

// begin starts an exchange of kind (of handle h).
func (w *Write) begin(kind exchangeKind, h *Handle) {
	w.ex = append(w.ex, exchange{kind: kind, h: h, verdict: -1})
}

// end ends the innermost exchange if it is of kind (a mismatch was
// reported by step).
func (w *Write) end(kind exchangeKind) {
	if n := len(w.ex); n > 0 && w.ex[n-1].kind == kind {
		w.ex = w.ex[:n-1]
	}
}

// within returns the innermost exchange if it is of kind, nil if not.
func (w *Write) within(kind exchangeKind) *exchange {
	if n := len(w.ex); n > 0 && w.ex[n-1].kind == kind {
		return &w.ex[n-1]
	}
	return nil
}
