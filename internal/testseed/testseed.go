// Package testseed gives a randomized test its seed: the one its replay
// flag was given, else the clock's, logged with the flag that replays it,
// so that a failure seen once can be run again as it ran. It is for
// tests only.
package testseed

import (
	"testing"
	"time"
)

// Seed is the seed of a test that replay (a flag's value, 0: unset) and
// flag (that flag's name) describe, logged on t.
func Seed[T int64 | uint64](t testing.TB, replay T, flag string) T {
	t.Helper()
	seed := replay
	if seed == 0 {
		seed = T(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: -%s=%d)", seed, flag, seed)
	return seed
}
