//go:build lockdep && (amd64 || arm64)

package lockorder

// goid names the calling goroutine by the address of its runtime g, which
// it keeps for its life: one load, where parsing runtime.Stack for the id
// (goid_stack.go) walks the stack and doubled the e2e suite's time. A g is
// reused only after its goroutine exits, by when it has unlocked what it
// took (or another goroutine has: release finds a lock by its holder).
func goid() uint64 { return uint64(getg()) }

// getg returns the calling goroutine's g (goid_amd64.s, goid_arm64.s).
func getg() uintptr
