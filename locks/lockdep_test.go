//go:build lockdep

package locks

import (
	"context"
	"testing"
	"time"

	"github.com/realm-dev/realm/internal/lockorder"
)

// TestNoLockHeldAcrossAWait: a wait in the table with a realm lock held
// (here an entry's) is reported; the same wait with none is not.
func TestNoLockHeldAcrossAWait(t *testing.T) {
	tab := NewTable()
	k := Key{1, 2}
	held, err := tab.Acquire(k, "a")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := tab.Acquire(Key{3, 4}, "b")
	if err != nil {
		t.Fatal(err)
	}
	brief := Patience{Grace: time.Now().Add(time.Millisecond)}
	vs := lockorder.Catch(func() { tab.WaitConflict(context.Background(), k, "b", Write, brief) })
	if len(vs) != 0 {
		t.Errorf("a wait holding nothing: %v", vs)
	}
	brief = Patience{Grace: time.Now().Add(time.Millisecond)}
	vs = lockorder.Catch(func() {
		mine.Shared().Lock()
		defer mine.Shared().Unlock()
		tab.WaitConflict(context.Background(), k, "b", Write, brief)
	})
	if len(vs) != 1 || vs[0].Taking != "a wait in the lock table" || vs[0].Held != "locks.Entry" {
		t.Errorf("a wait holding an entry: %v", vs)
	}
	held.Release()
	mine.Release()
}
