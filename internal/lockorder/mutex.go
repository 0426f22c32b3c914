//go:build !lockdep

package lockorder

import "sync"

// Enabled reports whether this build checks the order (the tag lockdep).
const Enabled = false

// Mutex is a sync.Mutex of class C. Only a build with the tag lockdep
// checks it: here each method is sync.Mutex's, inlined.
type Mutex[C Class] struct{ mu sync.Mutex }

func (m *Mutex[C]) Lock()         { m.mu.Lock() }
func (m *Mutex[C]) Unlock()       { m.mu.Unlock() }
func (m *Mutex[C]) TryLock() bool { return m.mu.TryLock() }

// LockOrdered is Lock for a lock taken together with others of its class,
// in ascending key order (the class's ordered key).
func (m *Mutex[C]) LockOrdered(key uint64) { m.mu.Lock() }

// RWMutex is a sync.RWMutex of class C, as Mutex is a sync.Mutex.
type RWMutex[C Class] struct{ mu sync.RWMutex }

func (m *RWMutex[C]) Lock()          { m.mu.Lock() }
func (m *RWMutex[C]) Unlock()        { m.mu.Unlock() }
func (m *RWMutex[C]) TryLock() bool  { return m.mu.TryLock() }
func (m *RWMutex[C]) RLock()         { m.mu.RLock() }
func (m *RWMutex[C]) RUnlock()       { m.mu.RUnlock() }
func (m *RWMutex[C]) TryRLock() bool { return m.mu.TryRLock() }

// AssertNoneHeld reports a violation if the calling goroutine holds any
// lock of the order; what says where (a kernel notification).
func AssertNoneHeld(what string) {}

// AssertNotHeld reports a violation if the calling goroutine holds a lock
// of class C.
func AssertNotHeld[C Class](what string) {}

// GoFuse says that the caller is about to take go-fuse's tree locks (what:
// the call); it reports a violation if the goroutine holds a lock of a
// class marked noGoFuse.
func GoFuse(what string) {}

// Violations returns the violations reported so far.
func Violations() []Violation { return nil }

// SetReporter has each violation, once reported, also go to report (the
// daemon's log); by default they go to stderr.
func SetReporter(report func(string)) {}

func knownSeen() []int { return nil }

// Catch runs f and returns the violations the calling goroutine made in
// it, which then neither fail the tests nor go to the reporter: for tests
// of the checks themselves.
func Catch(f func()) []Violation { f(); return nil }
