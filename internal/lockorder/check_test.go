//go:build lockdep

// The tests take locks for the order they are taken in, not to guard
// anything.
//lint:file-ignore SA2001 empty critical sections are the point here

package lockorder

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(RunTests(m)) }

// Classes of the tests' own, beside the table's.
var (
	outerClass = class{name: "outer"}
	innerClass = class{name: "inner", under: &outerClass}
	leafClass  = class{name: "leafy", under: &innerClass}
	otherClass = class{name: "other", under: &innerClass}
	seqClass   = class{name: "seq", under: &innerClass, ordered: "seq"}
	pinnedCls  = class{name: "pinned", under: &innerClass, noGoFuse: true}
)

type (
	outer  struct{}
	inner  struct{}
	leafy  struct{}
	other  struct{}
	seq    struct{}
	pinned struct{}
)

func (outer) class() *class  { return &outerClass }
func (inner) class() *class  { return &innerClass }
func (leafy) class() *class  { return &leafClass }
func (other) class() *class  { return &otherClass }
func (seq) class() *class    { return &seqClass }
func (pinned) class() *class { return &pinnedCls }

func takeOuter(m *Mutex[outer]) { m.Lock() }
func takeInner(m *Mutex[inner]) { m.Lock() }

func TestInOrderPasses(t *testing.T) {
	var o Mutex[outer]
	var i Mutex[inner]
	var l RWMutex[leafy]
	if vs := Catch(func() {
		takeOuter(&o)
		takeInner(&i)
		l.RLock()
		l.RUnlock()
		i.Unlock()
		l.RLock() // two below what is held
		l.RUnlock()
		o.Unlock()
	}); len(vs) != 0 {
		t.Fatalf("in order: %v", vs)
	}
}

// TestOutOfOrderReportsBothStacks: the report names both classes and
// shows where each lock was taken.
func TestOutOfOrderReportsBothStacks(t *testing.T) {
	var o Mutex[outer]
	var i Mutex[inner]
	vs := Catch(func() {
		takeInner(&i)
		takeOuter(&o)
		o.Unlock()
		i.Unlock()
	})
	if len(vs) != 1 {
		t.Fatalf("got %d violations, want 1: %v", len(vs), vs)
	}
	v := vs[0]
	if v.Taking != "outer" || v.Held != "inner" {
		t.Errorf("taking %q holding %q", v.Taking, v.Held)
	}
	if !strings.Contains(v.TakingStack, "lockorder.takeOuter") || !strings.Contains(v.TakingStack, "TestOutOfOrderReportsBothStacks") {
		t.Errorf("the stack taking outer:\n%s", v.TakingStack)
	}
	if !strings.Contains(v.HeldStack, "lockorder.takeInner") || strings.Contains(v.HeldStack, "takeOuter") {
		t.Errorf("the stack that took inner:\n%s", v.HeldStack)
	}
	if first, _, _ := strings.Cut(v.TakingStack, "\n"); !strings.HasSuffix(first, "lockorder.takeOuter") {
		t.Errorf("the stack starts in the checker's own frames:\n%s", v.TakingStack)
	}
	s := v.String()
	for _, want := range []string{Marker, "takeOuter", "takeInner"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// TestSiblingsApart: two classes under one are not nested, either way.
func TestSiblingsApart(t *testing.T) {
	var l Mutex[leafy]
	var o RWMutex[other]
	if vs := Catch(func() { l.Lock(); o.RLock(); o.RUnlock(); l.Unlock() }); len(vs) != 1 {
		t.Errorf("one sibling under the other: %d violations, want 1", len(vs))
	}
	if vs := Catch(func() { o.Lock(); l.Lock(); l.Unlock(); o.Unlock() }); len(vs) != 1 {
		t.Errorf("the other under the one: %d violations, want 1", len(vs))
	}
}

// TestSameClassInDeclaredOrder: two locks of an ordered class pass in
// ascending key order and fail reversed, or taken plainly.
func TestSameClassInDeclaredOrder(t *testing.T) {
	var a, b Mutex[seq]
	pair := func(first, second uint64) []Violation {
		return Catch(func() {
			a.LockOrdered(first)
			b.LockOrdered(second)
			b.Unlock()
			a.Unlock()
		})
	}
	if vs := pair(1, 2); len(vs) != 0 {
		t.Errorf("ascending: %v", vs)
	}
	if vs := pair(2, 1); len(vs) != 1 || !strings.Contains(vs[0].Taking, "seq 1") || !strings.Contains(vs[0].Held, "seq 2") {
		t.Errorf("descending: %v", vs)
	}
	if vs := Catch(func() { a.Lock(); b.Lock(); b.Unlock(); a.Unlock() }); len(vs) != 1 {
		t.Errorf("two plain Locks of one class: %d violations, want 1", len(vs))
	}
	var o, p Mutex[outer]
	if vs := Catch(func() { o.LockOrdered(1); p.LockOrdered(2); p.Unlock(); o.Unlock() }); len(vs) != 1 {
		t.Errorf("a class with no ordered key: %d violations, want 1", len(vs))
	}
}

// TestReadLockAgain: a goroutine's second RLock of one lock waits behind
// a writer that waits for its first.
func TestReadLockAgain(t *testing.T) {
	var l RWMutex[leafy]
	vs := Catch(func() {
		l.RLock()
		l.RLock()
		l.RUnlock()
		l.RUnlock()
	})
	if len(vs) != 1 {
		t.Fatalf("RLock twice: %d violations, want 1", len(vs))
	}
}

// TestUnlockedElsewhere: a lock another goroutine unlocks is no longer
// held by the one that took it.
func TestUnlockedElsewhere(t *testing.T) {
	var i Mutex[inner]
	var o Mutex[outer]
	vs := Catch(func() {
		i.Lock()
		var wg sync.WaitGroup
		wg.Go(i.Unlock)
		wg.Wait()
		o.Lock()
		o.Unlock()
	})
	if len(vs) != 0 {
		t.Fatalf("after another goroutine's unlock: %v", vs)
	}
}

// TestOtherGoroutinesApart: what one goroutine holds does not order
// another's.
func TestOtherGoroutinesApart(t *testing.T) {
	var i Mutex[inner]
	var o Mutex[outer]
	i.Lock()
	defer i.Unlock()
	done := make(chan []Violation)
	go func() { done <- Catch(func() { o.Lock(); o.Unlock() }) }()
	if vs := <-done; len(vs) != 0 {
		t.Fatalf("another goroutine's lock counted: %v", vs)
	}
}

func TestAssertions(t *testing.T) {
	var p Mutex[pinned]
	var l Mutex[leafy]
	if vs := Catch(func() { AssertNoneHeld("a notification"); GoFuse("GetChild") }); len(vs) != 0 {
		t.Errorf("none held: %v", vs)
	}
	vs := Catch(func() {
		l.Lock()
		defer l.Unlock()
		GoFuse("GetChild")        // a leaf may be held into go-fuse
		AssertNotHeld[pinned]("") // and is not pinned
		AssertNoneHeld("a notification")
	})
	if len(vs) != 1 || vs[0].Taking != "a notification" || !strings.HasPrefix(vs[0].Held, "leafy") {
		t.Errorf("a leaf held: %v", vs)
	}
	vs = Catch(func() {
		p.Lock()
		defer p.Unlock()
		GoFuse("GetChild")
		AssertNotHeld[pinned]("replace")
	})
	if len(vs) != 2 || vs[0].Taking != "go-fuse's tree locks (GetChild)" || vs[1].Taking != "replace" {
		t.Errorf("a noGoFuse class held: %v", vs)
	}
	if !strings.Contains(vs[0].TakingStack, "TestAssertions") || !strings.Contains(vs[0].HeldStack, "TestAssertions") {
		t.Errorf("stacks:\n%s\n%s", vs[0].TakingStack, vs[0].HeldStack)
	}
}

// TestReported: a violation outside Catch is kept (it fails the tests),
// goes to the reporter and to LOCKDEP_LOG, once; a repeat is counted.
func TestReported(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LOCKDEP_LOG", filepath.Join(dir, "lockdep"))
	var got []string
	SetReporter(func(r string) { got = append(got, r) })
	defer SetReporter(nil)
	before := len(Violations())
	defer forget(before)
	var i Mutex[inner]
	var o Mutex[outer]
	for range 3 {
		i.Lock()
		o.Lock()
		o.Unlock()
		i.Unlock()
	}
	vs := Violations()[before:]
	if len(vs) != 1 || vs[0].Repeats != 2 {
		t.Fatalf("violations %v, want one seen twice more", vs)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], Marker) {
		t.Errorf("reported %q", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "lockdep."+strconv.Itoa(os.Getpid())))
	if err != nil || strings.Count(string(b), Marker) != 1 {
		t.Errorf("LOCKDEP_LOG: %v %q", err, b)
	}
}

// forget drops the violations since the first n: they were the test's.
func forget(n int) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.violations = state.violations[:n]
	for k, s := range state.seen {
		if !s.known && s.i >= n {
			delete(state.seen, k)
		}
	}
}

// TestKnownBreach: a breach on the known list is counted, not kept; the
// same classes by another path are not it.
func TestKnownBreach(t *testing.T) {
	saved, savedSeen := known, state.known
	known = []breach{{held: &innerClass, taking: "outer", via: "lockorder.takeOuter"}}
	state.known = make([]int, 1)
	defer func() { known, state.known = saved, savedSeen }()
	before := len(Violations())
	defer forget(before)
	SetReporter(func(string) {})
	defer SetReporter(nil)
	var i Mutex[inner]
	var o Mutex[outer]
	i.Lock()
	takeOuter(&o)
	o.Unlock()
	if n := len(Violations()) - before; n != 0 || knownSeen()[0] != 1 {
		t.Errorf("known: %d kept, seen %v", n, knownSeen())
	}
	o.Lock() // not through takeOuter
	o.Unlock()
	i.Unlock()
	if n := len(Violations()) - before; n != 1 {
		t.Errorf("another path: %d kept, want 1", n)
	}
}

// TestOneGoroutineAcrossStackGrowth: a goroutine whose stack grew (and
// moved) since it took a lock is still the one that holds it.
func TestOneGoroutineAcrossStackGrowth(t *testing.T) {
	var i Mutex[inner]
	var o Mutex[outer]
	vs := Catch(func() {
		i.Lock()
		deep(10000, func() { o.Lock(); o.Unlock() })
		i.Unlock()
	})
	if len(vs) != 1 {
		t.Fatalf("outer under inner, deep in the stack: %d violations, want 1", len(vs))
	}
}

func deep(n int, f func()) {
	var pad [64]byte
	if n == 0 {
		f()
		return
	}
	deep(n-1, f)
	_ = pad
}

// TestRepeatsOfAnOrderedPair: a reversed pair by one path is one
// violation, whatever its keys.
func TestRepeatsOfAnOrderedPair(t *testing.T) {
	SetReporter(func(string) {})
	defer SetReporter(nil)
	before := len(Violations())
	defer forget(before)
	var a, b Mutex[seq]
	for k := range uint64(3) {
		a.LockOrdered(10 + k)
		b.LockOrdered(k)
		b.Unlock()
		a.Unlock()
	}
	if vs := Violations()[before:]; len(vs) != 1 || vs[0].Repeats != 2 {
		t.Errorf("violations %v, want one seen twice more", vs)
	}
}
