//go:build lockdep

package kernelnotify

import (
	"testing"

	"github.com/realm-dev/realm/internal/lockorder"
)

// TestNoLockHeldIntoANotification: a notification sent with any realm
// lock held is reported.
func TestNoLockHeldIntoANotification(t *testing.T) {
	var q Notifier
	var nsMu lockorder.RWMutex[lockorder.NsMu]
	vs := lockorder.Catch(func() {
		nsMu.RLock()
		defer nsMu.RUnlock()
		q.send(func() {})
	})
	if len(vs) != 1 || vs[0].Taking != "a kernel notification" || vs[0].Held != "FS.nsMu (read)" {
		t.Errorf("a notification under nsMu: %v", vs)
	}
}
