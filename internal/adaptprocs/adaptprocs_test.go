package adaptprocs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
			if got := p.Decide(tc.cur, waits(tc.samples)); got != tc.want {
				t.Errorf("Decide(%d, %v) = %d, want %d", tc.cur, tc.samples, got, tc.want)
			}
		})
	}
}

// waits are samples of the counts ns with no fsyncs, from as many
// callers as requests wait (at least one).
func waits(ns []int) []Sample {
	var s []Sample
	for _, n := range ns {
		s = append(s, Sample{Waiting: n, Callers: max(n, 1)})
	}
	return s
}

// TestDecideCallers: requests that overlap for one caller (its own and
// the RELEASEs the kernel sends at its closes) do not raise the Ps; two
// callers' do, and a crowd of one process's; uncounted callers leave the
// count to decide.
func TestDecideCallers(t *testing.T) {
	p := DefaultPolicy(4)
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    int
	}{
		{"one caller, two waiting", slices.Repeat([]Sample{{Waiting: 2, Callers: 1}}, 10), 1},
		{"one caller, two or three waiting", []Sample{{2, 0, 1}, {3, 0, 1}, {2, 0, 1}}, 1},
		{"one process's threads, three waiting", slices.Repeat([]Sample{{Waiting: 3, Callers: 1}}, 3), 1},
		{"one process's threads, four waiting", slices.Repeat([]Sample{{Waiting: 4, Callers: 1}}, 3), 4},
		{"two callers, two waiting", slices.Repeat([]Sample{{Waiting: 2, Callers: 2}}, 3), 4},
		{"a second caller in one sample of three", []Sample{{2, 0, 1}, {2, 0, 2}, {2, 0, 1}}, 1},
		{"two callers in two samples of three", []Sample{{2, 0, 2}, {2, 0, 1}, {2, 0, 2}}, 4},
		{"callers not counted", slices.Repeat([]Sample{{Waiting: 2, Callers: UnknownCallers}}, 3), 4},
		{"one caller's fsyncs still raise", slices.Repeat([]Sample{{1, 800, 1}}, 3), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Decide(1, tc.samples); got != tc.want {
				t.Errorf("Decide(1, %v) = %d, want %d", tc.samples, got, tc.want)
			}
		})
	}
}

// TestDecideSyncs: a rate of fsyncs a writer of every file makes raises
// the Ps, requests coming one at a time or not; an editor's now and then
// does not; they return to one P after a second of few.
func TestDecideSyncs(t *testing.T) {
	p := DefaultPolicy(4)
	one := func(rate float64, n int) []Sample { return slices.Repeat([]Sample{{1, rate, 1}}, n) }
	for _, tc := range []struct {
		name    string
		cur     int
		samples []Sample
		want    int
	}{
		{"an fsync a file raises", 1, one(800, 3), 4},
		{"an fsync now and then does not", 1, one(10, 30), 1},
		{"one burst sample among quiet ones does not", 1, append(one(0, 2), Sample{1, 200, 1}), 1},
		{"raised stays while they go on", 4, one(100, 20), 4},
		{"raised stays above the lower mark", 4, one(50, 20), 4},
		{"a second of few returns to one P", 4, one(5, 20), 1},
		{"a quiet second ending in a burst stays", 4, append(one(0, 17), one(800, 3)...), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Decide(tc.cur, tc.samples); got != tc.want {
				t.Errorf("Decide(%d, %v) = %d, want %d", tc.cur, tc.samples, got, tc.want)
			}
		})
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
// says four requests wait, down to one once it says one again; up again
// for a burst of fsyncs, down after a second without; a count asked for
// is left alone.
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
	var syncs atomic.Uint64
	c := Start(path, false, Counters{Syncs: syncs.Load}, slog.New(ev))
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after Start: GOMAXPROCS %d, want 1", got)
	}
	// Requests from two goroutines, each taking the samples that are due.
	stopRequests := requests(c, 2)
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
	syncs.Add(1 << 20) // a sample's rate far past the raise
	expect(3)
	write("0")
	expect(1) // no fsync since, nothing waiting: a second of idle samples
	stopRequests()
	c.Stop()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("Stop changed the Ps to %d", got)
	}

	runtime.GOMAXPROCS(3)
	if c := Start(path, true, Counters{}, slog.New(ev)); c != nil {
		t.Errorf("asked for: a controller")
	}
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("asked for: GOMAXPROCS %d, want 3 left alone", got)
	}
	c = Start(filepath.Join(t.TempDir(), "none"), false, Counters{}, slog.New(ev))
	c.Request() // a nil controller adapts nothing
	c.Stop()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("no count to read: GOMAXPROCS %d, want 3 left alone", got)
	}
}

// requests calls c.Request from n goroutines until the function it
// returns is called, as a mount's requests do.
func requests(c *Controller, n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					c.Request()
					runtime.Gosched()
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// TestRequestAfterAPause: the first request after a pause takes the idle
// samples the pause stands for, so that Ps raised for a burst return to
// one at the next request rather than a second of requests later, and no
// request after a Stop samples.
func TestRequestAfterAPause(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	path := filepath.Join(t.TempDir(), "waiting")
	if err := os.WriteFile(path, []byte("4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := make(events, 4)
	c := Start(path, false, Counters{}, slog.New(ev))
	for _, now := range []time.Duration{Interval, 2 * Interval, 3 * Interval} {
		c.sample(now)
	}
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("after three samples of 4 waiting: GOMAXPROCS %d, want 3", got)
	}
	<-ev
	if err := os.WriteFile(path, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.sample(3*Interval + time.Duration(c.policy.LowerWindow+1)*Interval) // a pause of a window's samples
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("the first sample after a pause: GOMAXPROCS %d, want 1", got)
	}
	c.Stop()
	n := len(c.samples)
	c.Request()
	if len(c.samples) != n {
		t.Errorf("a request after Stop took a sample")
	}
}

// failures is a slog handler that hands each error record's message to a
// channel.
type failures chan string

func (f failures) Enabled(context.Context, slog.Level) bool { return true }
func (f failures) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f failures) WithGroup(string) slog.Handler            { return f }
func (f failures) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		f <- r.Message
	}
	return nil
}

// TestStartSurvivesAFault: a panic in the controller (here, the fsync
// counter it reads) is logged and leaves every P; the request that took
// the sample goes on, and Stop still returns.
func TestStartSurvivesAFault(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	path := filepath.Join(t.TempDir(), "waiting")
	if err := os.WriteFile(path, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fails := make(failures, 1)
	var faults atomic.Bool
	c := Start(path, false, Counters{Syncs: func() uint64 {
		if faults.Load() {
			panic("a counter's fault")
		}
		return 0
	}}, slog.New(fails))
	faults.Store(true)
	stopRequests := requests(c, 1) // a request taking the faulty sample goes on
	select {
	case msg := <-fails:
		t.Logf("logged: %s", msg)
	case <-time.After(time.Minute): // a deadline for a hang, not a measure
		t.Fatal("no failure logged")
	}
	stopRequests()
	c.Stop()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("after the fault: GOMAXPROCS %d, want every P (3)", got)
	}
}
