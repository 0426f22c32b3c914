//go:build lockdep

package lockorder

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// The checker. Each goroutine's held locks are kept by its id (read from
// runtime.Stack, as only a checking build may), each with the stack that
// took it. A lock is checked before it is waited for, so that an order
// that would deadlock is reported before it does.

// acq is one acquisition of a lock by a goroutine.
type acq struct {
	g       uint64
	lock    unsafe.Pointer
	c       *class
	read    bool
	key     uint64 // with ordered: LockOrdered's key
	ordered bool
	pcs     []uintptr
}

var state struct {
	mu     sync.Mutex
	held   map[uint64][]*acq         // by goroutine
	writer map[unsafe.Pointer]uint64 // the goroutine holding each lock held for writing
	// catching: the goroutines in Catch, and what they caught.
	catching   map[uint64]*[]Violation
	violations []Violation
	seen       map[string]sighting // by a breach's classes and places
	known      []int               // how often each known breach was seen
	report     func(string)
}

func init() {
	state.held = make(map[uint64][]*acq)
	state.writer = make(map[unsafe.Pointer]uint64)
	state.catching = make(map[uint64]*[]Violation)
	state.seen = make(map[string]sighting)
	state.known = make([]int, len(known))
}

func newAcq(c *class, lock unsafe.Pointer, read bool, key uint64, ordered bool) *acq {
	return &acq{g: goid(), lock: lock, c: c, read: read, key: key, ordered: ordered, pcs: callers()}
}

// before checks a, about to be waited for, against the goroutine's held
// locks.
func before(c *class, lock unsafe.Pointer, read bool, key uint64, ordered bool) *acq {
	a := newAcq(c, lock, read, key, ordered)
	var vs []found
	state.mu.Lock()
	for _, h := range state.held[a.g] {
		if !a.after(h) {
			vs = append(vs, found{what: a.c.name, taking: a.String(), held: h, pcs: a.pcs})
		}
	}
	state.mu.Unlock()
	record(a.g, vs)
	return a
}

// after reports whether a may be taken while h is held.
func (a *acq) after(h *acq) bool {
	switch {
	case a.lock == h.lock:
		return false // again: a Mutex deadlocks, an RLock may behind a writer
	case a.c.below(h.c):
		return true
	}
	return a.c == h.c && a.c.ordered != "" && a.ordered && h.ordered && a.key > h.key
}

// below reports whether c is below h in the tree.
func (c *class) below(h *class) bool {
	for u := c.under; u != nil; u = u.under {
		if u == h {
			return true
		}
	}
	return false
}

func (a *acq) String() string {
	s := a.c.name
	if a.read {
		s += " (read)"
	}
	if a.ordered {
		s += " (" + a.c.ordered + " " + strconv.FormatUint(a.key, 10) + ")"
	}
	return s
}

// hold records a as held, once taken.
func (a *acq) hold() {
	state.mu.Lock()
	state.held[a.g] = append(state.held[a.g], a)
	if !a.read {
		state.writer[a.lock] = a.g
	}
	state.mu.Unlock()
}

// release forgets the acquisition of lock (a read one: read): by the
// goroutine that holds it for writing, which need not be the caller (a
// lock may be unlocked by another goroutine than took it), and for
// reading by the caller if it holds it, else by one that does.
func release(lock unsafe.Pointer, read bool) {
	if !read {
		state.mu.Lock()
		defer state.mu.Unlock()
		if g, ok := state.writer[lock]; ok {
			delete(state.writer, lock)
			drop(g, lock, false)
		}
		return
	}
	g := goid()
	state.mu.Lock()
	defer state.mu.Unlock()
	if drop(g, lock, true) {
		return
	}
	for other := range state.held {
		if drop(other, lock, true) {
			return
		}
	}
}

// drop removes goroutine g's latest acquisition of lock; state.mu is held.
func drop(g uint64, lock unsafe.Pointer, read bool) bool {
	hs := state.held[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].lock == lock && hs[i].read == read {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(state.held, g)
			} else {
				state.held[g] = hs
			}
			return true
		}
	}
	return false
}

// assert reports the held locks of the calling goroutine whose class is
// banned at what.
func assert(what string, banned func(*class) bool) {
	g := goid()
	var pcs []uintptr
	var vs []found
	state.mu.Lock()
	for _, h := range state.held[g] {
		if banned(h.c) {
			if pcs == nil {
				pcs = callers()
			}
			vs = append(vs, found{what: what, taking: what, held: h, pcs: pcs})
		}
	}
	state.mu.Unlock()
	record(g, vs)
}

// record keeps the violations of goroutine g: caught, if g is in Catch;
// else each new one is kept and reported, a repeat counted.
func record(g uint64, vs []found) {
	if len(vs) == 0 {
		return
	}
	var reports []string
	state.mu.Lock()
	if caught := state.catching[g]; caught != nil {
		for _, f := range vs {
			*caught = append(*caught, f.violation())
		}
		state.mu.Unlock()
		return
	}
	for _, f := range vs {
		if r, ok := note(&f); ok {
			reports = append(reports, r)
		}
	}
	report := state.report
	state.mu.Unlock()
	for _, r := range reports {
		deliver(r, report)
	}
}

// sighting is where a breach by one path went: a kept violation's index,
// or a known breach's.
type sighting struct {
	known bool
	i     int
}

// note counts f, a repeat or a known breach, or keeps it, new: then ok,
// with its report. state.mu is held.
func note(f *found) (report string, ok bool) {
	// One breach, by the same path, may come thousands of times: only
	// the first is looked at closely.
	key := f.key()
	s, seen := state.seen[key]
	if !seen {
		if k := f.known(); k >= 0 {
			s = sighting{known: true, i: k}
		} else {
			s = sighting{i: len(state.violations)}
			v := f.violation()
			state.violations = append(state.violations, v)
			report, ok = v.String(), true
		}
		state.seen[key] = s
	}
	switch {
	case s.known:
		state.known[s.i]++
	case seen:
		state.violations[s.i].Repeats++
	}
	return report, ok
}

// found is a violation as met: taking (a lock, or an assertion's what:
// what) with the stack pcs while held was held. Stacks are formatted only
// for a new one.
type found struct {
	what, taking string
	held         *acq
	pcs          []uintptr
}

func (f *found) violation() Violation {
	return Violation{Taking: f.taking, Held: f.held.String(), TakingStack: stack(f.pcs), HeldStack: stack(f.held.pcs)}
}

// key tells one breach by one path from another: the classes (not the
// keys of ordered locks, which differ every time) and both stacks.
func (f *found) key() string {
	return f.what + "\x00" + f.held.c.name + "\x00" + pcsKey(f.pcs) + "\x00" + pcsKey(f.held.pcs)
}

// pcsKey is pcs's bytes, as a string.
func pcsKey(pcs []uintptr) string {
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(pcs))), len(pcs)*int(unsafe.Sizeof(uintptr(0)))))
}

// known is the index of f among the known breaches, -1 if it is none.
func (f *found) known() int {
	for i, b := range known {
		if f.held.c == b.held && f.taking == b.taking && passes(f.pcs, b.via) {
			return i
		}
	}
	return -1
}

// passes reports whether the stack pcs passes through the function named
// (as a frame names it) with the suffix fn.
func passes(pcs []uintptr, fn string) bool {
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/"+fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

func knownSeen() []int {
	state.mu.Lock()
	defer state.mu.Unlock()
	return append([]int(nil), state.known...)
}

// deliver writes a new violation's report to report (else stderr), and to
// the file LOCKDEP_LOG.PID if LOCKDEP_LOG is set, as GORACE's log_path: a
// detached daemon has no stderr.
func deliver(r string, report func(string)) {
	if report != nil {
		report(r)
	} else {
		fmt.Fprintf(os.Stderr, "%s\n", r)
	}
	if prefix := os.Getenv("LOCKDEP_LOG"); prefix != "" {
		name := prefix + "." + strconv.Itoa(os.Getpid())
		if f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, "%s\n", r)
			f.Close()
		}
	}
}

// Violations returns the violations reported so far.
func Violations() []Violation {
	state.mu.Lock()
	defer state.mu.Unlock()
	return append([]Violation(nil), state.violations...)
}

// SetReporter has each violation, once reported, also go to report (the
// daemon's log); by default they go to stderr.
func SetReporter(report func(string)) {
	state.mu.Lock()
	state.report = report
	state.mu.Unlock()
}

// Catch runs f and returns the violations the calling goroutine made in
// it, which then neither fail the tests nor go to the reporter: for tests
// of the checks themselves.
func Catch(f func()) []Violation {
	g := goid()
	var caught []Violation
	state.mu.Lock()
	state.catching[g] = &caught
	state.mu.Unlock()
	defer func() {
		state.mu.Lock()
		delete(state.catching, g)
		state.mu.Unlock()
	}()
	f()
	return caught
}

// callers is the calling goroutine's stack; stack leaves out its frames in
// this package.
func callers() []uintptr {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(3, pcs)
	return pcs[:n]
}

// stack formats pcs as a panic does, a function and its file:line a frame,
// from the first frame outside this package's own (non-test) files.
func stack(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	inside := true
	for {
		f, more := frames.Next()
		inside = inside && filepath.Dir(f.File) == here && !strings.HasSuffix(f.File, "_test.go")
		if !inside {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

// here is this package's directory, as frames name their files.
var here = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}()
