package devthread

import (
	"os"
	"strings"
	"testing"
)

// TestStartWithoutDevice: with no FUSE device open there is nothing to
// clone; Start says so and leaves the process's descriptor table as it was.
// (Start on a mounted device is tested end to end, in e2e's
// TestKilledWhileNotificationWaits.)
func TestStartWithoutDevice(t *testing.T) {
	before := descriptors(t)
	if _, err := Start(); err == nil || !strings.Contains(err.Error(), "no FUSE device") {
		t.Fatalf("Start = %v, want an error naming the missing device", err)
	}
	if after := descriptors(t); after != before {
		t.Errorf("the process holds %d descriptors after a failed Start, %d before", after, before)
	}
}

func descriptors(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
