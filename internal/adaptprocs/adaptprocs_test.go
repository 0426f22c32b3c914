package adaptprocs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	p := DefaultPolicy(4)
	for _, tc := range []struct {
		name    string
		cur     int
		samples []int
		want    int
	}{
		{"no samples", 1, nil, 1},
		{"one at a time", 1, slices.Repeat([]int{1}, 30), 1},
		{"a RELEASE answered late now and then", 1, []int{1, 2, 1, 1, 2, 1}, 1},
		{"two overlapping twice is not enough", 1, []int{1, 2, 2}, 1},
		{"three samples of two raise", 1, []int{1, 2, 2, 2}, 4},
		{"four writers raise", 1, []int{4, 4, 3}, 4},
		{"raised stays while they overlap", 4, []int{4, 4, 4, 4}, 4},
		{"raised stays before a second of samples", 4, slices.Repeat([]int{1}, 19), 4},
		{"a quiet second returns to one P", 4, slices.Repeat([]int{1}, 20), 1},
		{"an idle second returns to one P", 4, make([]int, 20), 1},
		{"a second with a burst in it stays", 4, append(slices.Repeat([]int{1}, 15), 4, 4, 4, 1, 1), 4},
		{"a burst after an idle while stays", 4, append(make([]int, 17), 4, 4, 4), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Decide(tc.cur, tc.samples); got != tc.want {
				t.Errorf("Decide(%d, %v) = %d, want %d", tc.cur, tc.samples, got, tc.want)
			}
		})
	}
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		zeros, cur int
		want       time.Duration
	}{
		{0, 1, Interval},
		{IdleAfter - 1, 1, Interval},
		{IdleAfter, 1, IdleInterval},
		{IdleAfter * 10, 1, IdleInterval},
		{IdleAfter, 4, Interval}, // raised: sampled on until it returns
	} {
		if got := interval(tc.zeros, tc.cur); got != tc.want {
			t.Errorf("interval(%d, %d) = %v, want %v", tc.zeros, tc.cur, got, tc.want)
		}
	}
}

// events is a slog handler that hands each "procs" record's Ps to a
// channel, so that the test waits for the change, not for time.
type events chan int64

func (e events) Enabled(context.Context, slog.Level) bool { return true }
func (e events) WithAttrs([]slog.Attr) slog.Handler       { return e }
func (e events) WithGroup(string) slog.Handler            { return e }
func (e events) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "procs" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "procs" {
			e <- a.Value.Int64()
		}
		return true
	})
	return nil
}

// TestStartFollowsTheCount: from one P, up to every P while the count
// says four requests wait, down to one once it says one again; a count
// asked for is left alone.
func TestStartFollowsTheCount(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // the Ps not asked for
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	path := filepath.Join(t.TempDir(), "waiting")
	write := func(v string) {
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	ev := make(events, 4)
	stop := Start(path, false, slog.New(ev))
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after Start: GOMAXPROCS %d, want 1", got)
	}
	expect := func(want int64) {
		t.Helper()
		select {
		case got := <-ev:
			if got != want || int64(runtime.GOMAXPROCS(0)) != want {
				t.Fatalf("procs logged %d, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), want)
			}
		case <-time.After(time.Minute): // a deadline for a hang, not a measure
			t.Fatalf("no change to %d Ps", want)
		}
	}
	write("4")
	expect(3)
	write("1")
	expect(1)
	stop()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("stop changed the Ps to %d", got)
	}

	runtime.GOMAXPROCS(3)
	Start(path, true, slog.New(ev))()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("asked for: GOMAXPROCS %d, want 3 left alone", got)
	}
	Start(filepath.Join(t.TempDir(), "none"), false, slog.New(ev))()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("no count to read: GOMAXPROCS %d, want 3 left alone", got)
	}
}
