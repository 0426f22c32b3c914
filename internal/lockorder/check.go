//go:build lockdep

package lockorder

import (
	"bytes"
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
	mu   sync.Mutex
	held map[uint64][]*acq // by goroutine
	// catching: the goroutines in Catch, and what they caught.
	catching   map[uint64]*[]Violation
	violations []Violation
	seen       map[string]int // a breach's classes and places: its index in violations
	known      []int          // how often each known breach was seen
	report     func(string)
}

func init() {
	state.held = make(map[uint64][]*acq)
	state.catching = make(map[uint64]*[]Violation)
	state.seen = make(map[string]int)
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
			vs = append(vs, found{Violation{Taking: a.String(), Held: h.String(), TakingStack: stack(a.pcs), HeldStack: stack(h.pcs)}, h.c})
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
	state.mu.Unlock()
}

// release forgets the acquisition of lock (a read one: read), by the
// calling goroutine if it has one, else by the one that does: a lock may
// be unlocked by another goroutine than took it.
func release(lock unsafe.Pointer, read bool) {
	g := goid()
	state.mu.Lock()
	defer state.mu.Unlock()
	if drop(g, lock, read) {
		return
	}
	for other := range state.held {
		if drop(other, lock, read) {
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
			vs = append(vs, found{Violation{Taking: what, Held: h.String(), TakingStack: stack(pcs), HeldStack: stack(h.pcs)}, h.c})
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
			*caught = append(*caught, f.Violation)
		}
		state.mu.Unlock()
		return
	}
	for _, f := range vs {
		if i := f.known(); i >= 0 {
			state.known[i]++
			continue
		}
		v := f.Violation
		// One breach, by the same path, may come thousands of times.
		key := v.Taking + "\x00" + v.Held + "\x00" + v.HeldStack + "\x00" + v.TakingStack
		if i, ok := state.seen[key]; ok {
			state.violations[i].Repeats++
			continue
		}
		state.seen[key] = len(state.violations)
		state.violations = append(state.violations, v)
		reports = append(reports, v.String())
	}
	report := state.report
	state.mu.Unlock()
	for _, r := range reports {
		deliver(r, report)
	}
}

// found is a violation and the class of the lock held.
type found struct {
	Violation
	held *class
}

// known is the index of f among the known breaches, -1 if it is none.
func (f *found) known() int {
	for i, b := range known {
		if f.held == b.held && f.Taking == b.taking && strings.Contains(f.TakingStack, "/"+b.via+"\n") {
			return i
		}
	}
	return -1
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

// goid is the calling goroutine's id, from the first line of its stack:
// "goroutine 18 [running]:".
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lockorder: no goroutine id in " + strconv.Quote(string(buf[:])))
	}
	return id
}

// callers is the calling goroutine's stack; stack leaves out its frames in
// this package.
func callers() []uintptr {
	pcs := make([]uintptr, 40)
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
