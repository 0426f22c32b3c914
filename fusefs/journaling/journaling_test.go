package journaling

import (
	"testing"

	"github.com/realm-dev/realm/fusefs/journal"
)

// TestStamp: each record gets its owner's incarnation where the producer
// did not set one, and keeps the one it set.
func TestStamp(t *testing.T) {
	asked := 0
	p := &Producer{Incarnation: func(owner string) string {
		asked++
		if owner == "session:7" {
			return "4242-196df20c"
		}
		return ""
	}}
	for _, tc := range []struct {
		rec  journal.Record
		want string
	}{
		{journal.Record{Owner: "session:7"}, "4242-196df20c"},
		{journal.Record{Owner: "cgroup:/a"}, ""},
		{journal.Record{Owner: "session:7", OwnerStart: "1-x"}, "1-x"},
	} {
		rec := tc.rec
		p.stamp(&rec)
		if rec.OwnerStart != tc.want {
			t.Errorf("%s: OwnerStart %q, want %q", tc.rec.Owner, rec.OwnerStart, tc.want)
		}
	}
	if asked != 2 {
		t.Errorf("asked %d times, want 2", asked)
	}
}
