//go:build lockdep

package lockorder

import (
	"sync"
	"unsafe"
)

// Enabled reports whether this build checks the order (the tag lockdep).
const Enabled = true

// Mutex is a sync.Mutex of class C whose acquisitions are checked against
// the order.
type Mutex[C Class] struct{ mu sync.Mutex }

func (m *Mutex[C]) Lock() {
	a := before(classOf[C](), unsafe.Pointer(m), false, 0, false)
	m.mu.Lock()
	a.hold()
}

func (m *Mutex[C]) Unlock() {
	release(unsafe.Pointer(m), false)
	m.mu.Unlock()
}

// TryLock, which cannot wait, is not checked; a lock it takes is held.
func (m *Mutex[C]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	newAcq(classOf[C](), unsafe.Pointer(m), false, 0, false).hold()
	return true
}

// LockOrdered is Lock for a lock taken together with others of its class,
// in ascending key order (the class's ordered key).
func (m *Mutex[C]) LockOrdered(key uint64) {
	a := before(classOf[C](), unsafe.Pointer(m), false, key, true)
	m.mu.Lock()
	a.hold()
}

// RWMutex is a sync.RWMutex of class C whose acquisitions, shared ones
// too, are checked against the order.
type RWMutex[C Class] struct{ mu sync.RWMutex }

func (m *RWMutex[C]) Lock() {
	a := before(classOf[C](), unsafe.Pointer(m), false, 0, false)
	m.mu.Lock()
	a.hold()
}

func (m *RWMutex[C]) Unlock() {
	release(unsafe.Pointer(m), false)
	m.mu.Unlock()
}

func (m *RWMutex[C]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	newAcq(classOf[C](), unsafe.Pointer(m), false, 0, false).hold()
	return true
}

// RLock is checked as Lock is: a goroutine that takes a read lock it holds
// already waits behind a writer that waits for it.
func (m *RWMutex[C]) RLock() {
	a := before(classOf[C](), unsafe.Pointer(m), true, 0, false)
	m.mu.RLock()
	a.hold()
}

func (m *RWMutex[C]) RUnlock() {
	release(unsafe.Pointer(m), true)
	m.mu.RUnlock()
}

func (m *RWMutex[C]) TryRLock() bool {
	if !m.mu.TryRLock() {
		return false
	}
	newAcq(classOf[C](), unsafe.Pointer(m), true, 0, false).hold()
	return true
}

func classOf[C Class]() *class {
	var c C
	return c.class()
}

// AssertNoneHeld reports a violation if the calling goroutine holds any
// lock of the order; what says where (a kernel notification).
func AssertNoneHeld(what string) {
	assert(what, func(*class) bool { return true })
}

// AssertNotHeld reports a violation if the calling goroutine holds a lock
// of class C.
func AssertNotHeld[C Class](what string) {
	c := classOf[C]()
	assert(what, func(h *class) bool { return h == c })
}

// GoFuse says that the caller is about to take go-fuse's tree locks (what:
// the call); it reports a violation if the goroutine holds a lock of a
// class marked noGoFuse.
func GoFuse(what string) {
	assert("go-fuse's tree locks ("+what+")", func(h *class) bool { return h.noGoFuse })
}
