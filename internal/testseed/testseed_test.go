package testseed

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what is logged.
type recorder struct {
	testing.TB
	logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.TB.Logf(format, args...)
}

// TestSeed: a replayed seed is the one given; none given, one from the
// clock, not 0; each logged with its flag.
func TestSeed(t *testing.T) {
	r := &recorder{TB: t}
	if got := Seed(r, int64(42), "x.seed"); got != 42 {
		t.Errorf("replayed: %d, want 42", got)
	}
	if got := Seed(r, uint64(0), "y.seed"); got == 0 {
		t.Error("from the clock: 0")
	}
	if len(r.logs) != 2 || !strings.Contains(r.logs[0], "-x.seed=42") || !strings.Contains(r.logs[1], "-y.seed=") {
		t.Errorf("logged %q", r.logs)
	}
}
