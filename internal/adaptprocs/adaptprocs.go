// Package adaptprocs sets the daemon's GOMAXPROCS by how many of its FUSE
// connection's requests overlap, as the kernel counts them (fusectl's
// waiting file): one P while requests come one at a time, so that each
// runs on the thread that read it rather than being handed between
// threads (docs/PERFORMANCE.md, "One P for the daemon"), and every P the
// daemon may use while several wait at once, so that parallel writers do
// not queue for the one P an fsync holds.
//
// Go's own count of goroutines waiting for a P is no signal here: at one
// P go-fuse starts a reader goroutine for each request read while no
// other reader has run yet, and tens of them wait at a time.
//
// The samples are taken by the requests themselves (Controller.Request,
// at most one every Interval), not by a timer: at one P a timer's
// goroutine runs only once Go's monitor has taken the P from the go-fuse
// reader blocked in read(2), and a timer every 50 ms left the monitor at
// its 20 µs tick, handing the P between threads at every request, for
// whole runs of a workload (an rm -rf 1.3 times as long in half the runs:
// docs/PERFORMANCE.md). Where no request comes, nothing is sampled: the
// first request after a pause counts it as the idle samples it would
// have given.
package adaptprocs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
)

// Policy decides the Ps from samples of the count of the connection's
// requests not yet answered and of the rate of the daemon's fsyncs.
type Policy struct {
	Many        int     // the Ps while requests overlap
	RaiseWindow int     // samples whose mean decides a raise
	RaiseAt     float64 // a mean at or past it raises to Many
	// CallersAt: the requests overlap for callers that run in parallel
	// only where the mean count of processes making requests over
	// RaiseWindow is at or past it, or where the mean count of waiting
	// requests is at or past CrowdAt whoever makes them (the threads of
	// one process). One sequential caller's requests overlap the kernel's
	// own (the RELEASE of a file or directory, sent at a close and
	// answered after the caller's next request), and more Ps serve it
	// slower (in the rounds that rose, an rm -rf 1.3 times, a tar x 1.5,
	// a Go program creating files 1.4: docs/PERFORMANCE.md, "One caller
	// is not two").
	CallersAt, CrowdAt float64
	LowerWindow        int     // samples whose mean decides a return to one P
	LowerBelow         float64 // a mean below it returns to one P
	// SyncRaise: a mean rate of fsyncs (a second) at or past it over
	// RaiseWindow raises to Many; SyncLower: one below it over LowerWindow
	// lets the Ps return to one. An fsync is a long system call, and at
	// one P it holds the P: Go's monitor takes it back and hands it to
	// another thread while the call sleeps, and the request that made it
	// waits for the P again when it returns (an untar with
	// durability=full: 7 % slower at one P than at two).
	SyncRaise, SyncLower float64
}

// A Sample is one look at the daemon: the count of its connection's
// requests not yet answered, its fsyncs a second since the last, and the
// processes that made requests since the last (UnknownCallers where they
// are not counted).
type Sample struct {
	Waiting     int
	SyncsPerSec float64
	Callers     int
}

// UnknownCallers is a sample's Callers where the daemon does not count
// them: the count of waiting requests alone decides.
const UnknownCallers = 1 << 20

// DefaultPolicy is the policy for a daemon Go gives many Ps. A sequential
// writer's samples are 1 with a 2 now and then (a RELEASE answered after
// the next request came); four parallel writers' are 4 (measured:
// docs/PERFORMANCE.md). A raise takes three samples, a return a second's.
// A writer that fsyncs each file (durability=full, or its own fsync) makes
// hundreds a second; an editor's occasional save makes none to speak of.
func DefaultPolicy(many int) Policy {
	return Policy{Many: many, RaiseWindow: 3, RaiseAt: 1.75, CallersAt: 1.5, CrowdAt: 4, LowerWindow: 20, LowerBelow: 1.25,
		SyncRaise: 80, SyncLower: 20}
}

// Interval is how often the count is sampled while requests come.
const Interval = 50 * time.Millisecond

// Decide is the Ps to run with, running with cur, after samples (the
// newest last).
func (p Policy) Decide(cur int, samples []Sample) int {
	waiting := func(n int) float64 { return mean(samples, n, waitingOf) }
	syncs := func(n int) float64 { return mean(samples, n, syncsOf) }
	w := waiting(p.RaiseWindow)
	parallel := w >= p.RaiseAt && mean(samples, p.RaiseWindow, callersOf) >= p.CallersAt || w >= p.CrowdAt
	busy := parallel || syncs(p.RaiseWindow) >= p.SyncRaise
	if cur < p.Many && busy {
		return p.Many
	}
	if cur > 1 && len(samples) >= p.LowerWindow && waiting(p.LowerWindow) < p.LowerBelow &&
		syncs(p.LowerWindow) < p.SyncLower && !busy { // not while they overlap now, after an idle while
		return 1
	}
	return cur
}

// waitingOf, syncsOf and callersOf are what mean averages of a sample.
func waitingOf(s Sample) float64 { return float64(s.Waiting) }
func syncsOf(s Sample) float64   { return s.SyncsPerSec }
func callersOf(s Sample) float64 { return float64(s.Callers) }

// mean is the mean of f over the last n samples (of fewer where there are
// fewer; 0 of none).
func mean(samples []Sample, n int, f func(Sample) float64) float64 {
	samples = samples[max(0, len(samples)-n):]
	if len(samples) == 0 {
		return 0
	}
	sum := 0.0
	for _, s := range samples {
		sum += f(s)
	}
	return sum / float64(len(samples))
}

// WaitingFile is fusectl's count of the requests not yet answered of the
// connection whose mount's device has the minor number minor (fusectl
// names a connection by it).
func WaitingFile(minor uint32) string {
	return "/sys/fs/fuse/connections/" + strconv.FormatUint(uint64(minor), 10) + "/waiting"
}

// Counters are what the daemon counts for the controller beside
// fusectl's count; nil: not counted.
type Counters struct {
	Syncs   func() uint64 // the fsyncs it has made so far (dirfd.Syncs)
	Callers func() int    // the processes that made requests since the last call (fusefs/callers)
}

// A Controller adapts GOMAXPROCS from samples the mount's requests take
// (Request); Start makes one. A nil one adapts nothing.
type Controller struct {
	next atomic.Int64 // when the next sample is due (ns since base)
	busy atomic.Bool  // a request is taking a sample
	off  atomic.Bool  // stopped: no more samples

	// The sampling request's alone (busy held):
	base    time.Time
	path    string
	policy  Policy
	logger  *slog.Logger
	rate    func() float64
	callers func() int
	samples []Sample
	cur     int
	last    time.Duration // when the last sample was taken
}

// Start adapts GOMAXPROCS to the count in path, to the rate of the
// daemon's fsyncs and to the processes making requests (c), from one P,
// at the samples the mount's requests take (Controller.Request) until
// Stop; each change is logged. It changes nothing, returning a Controller
// that adapts nothing, and says why in the log, where fixed says so (-o
// procs asked for Ps, or the mount's device is unknown), where GOMAXPROCS
// is in the environment, where Go gives one P anyway, or where the count
// cannot be read (no fusectl mounted, a daemon not allowed to read it).
func Start(path string, fixed bool, c Counters, logger *slog.Logger) *Controller {
	many := runtime.GOMAXPROCS(0)
	if fixed || os.Getenv("GOMAXPROCS") != "" || many == 1 {
		logger.Info("procs: fixed", "procs", many)
		return nil
	}
	if _, err := readCount(path); err != nil {
		logger.Info("procs: not adapted: the count of waiting requests is unread", "procs", many, "err", err)
		return nil
	}
	runtime.GOMAXPROCS(1)
	ctl := &Controller{base: time.Now(), path: path, policy: DefaultPolicy(many), logger: logger,
		rate: syncRate(c.Syncs), callers: func() int { return UnknownCallers }, cur: 1}
	if c.Callers != nil {
		ctl.callers = c.Callers
	}
	p := ctl.policy
	ctl.samples = make([]Sample, 0, 2*max(p.RaiseWindow, p.LowerWindow))
	ctl.next.Store(int64(Interval))
	return ctl
}

// Request is called by each request of the mount: where a sample is due
// and no other request is taking one, it takes it, on the request's own
// goroutine (a read of fusectl's count and, rarely, a change of the Ps).
func (c *Controller) Request() {
	if c == nil {
		return
	}
	now := time.Since(c.base)
	if int64(now) < c.next.Load() || c.off.Load() || !c.busy.CompareAndSwap(false, true) {
		return
	}
	defer c.busy.Store(false)
	if int64(now) < c.next.Load() || c.off.Load() { // taken by another meanwhile, or stopped
		return
	}
	c.next.Store(int64(now + Interval))
	c.sampleSafely(now)
}

// Stop ends the adapting: no request takes a sample after it (one under
// way finishes), and the Ps stay as they are.
func (c *Controller) Stop() {
	if c != nil {
		c.off.Store(true)
	}
}

// sampleSafely is sample, a fault of which (a panic) must not end the
// request or the daemon: it leaves every P and ends the adapting.
func (c *Controller) sampleSafely(now time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			c.giveUp(slog.LevelError, "procs: the controller failed; back to every P", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	c.sample(now)
}

// giveUp ends the adapting with every P, logged at level with msg and
// args.
func (c *Controller) giveUp(level slog.Level, msg string, args ...any) {
	c.Stop()
	runtime.GOMAXPROCS(c.policy.Many)
	c.logger.Log(context.Background(), level, msg, append([]any{"procs", c.policy.Many}, args...)...)
}

// sample takes one sample at now, after the idle samples the pause since
// the last one stands for, and sets GOMAXPROCS as the policy decides.
func (c *Controller) sample(now time.Duration) {
	n, err := readCount(c.path)
	if err != nil {
		c.giveUp(slog.LevelWarn, "procs: the count of waiting requests went unread; back to every P", "err", err)
		return
	}
	p := c.policy
	idle := min(int((now-c.last)/Interval)-1, p.LowerWindow)
	c.last = now
	for range idle { // no request came: nothing waited, no fsync, no caller
		c.add(Sample{})
	}
	r := c.rate()
	c.add(Sample{Waiting: n, SyncsPerSec: r, Callers: c.callers()})
	if next := p.Decide(c.cur, c.samples); next != c.cur {
		runtime.GOMAXPROCS(next)
		c.logger.Info("procs", "procs", next, "waiting_mean", mean(c.samples, p.RaiseWindow, waitingOf),
			"fsyncs_per_sec", mean(c.samples, p.RaiseWindow, syncsOf), "callers_mean", mean(c.samples, p.RaiseWindow, callersOf))
		c.cur, c.samples = next, c.samples[:0] // each change is judged on samples after it
	}
}

// add adds s to the samples, the older half dropped where they are full.
func (c *Controller) add(s Sample) {
	if len(c.samples) == cap(c.samples) {
		c.samples = append(c.samples[:0], c.samples[len(c.samples)/2:]...)
	}
	c.samples = append(c.samples, s)
}

// syncRate returns a function that gives the rate of syncs (a second)
// since its last call (or since syncRate): 0 where syncs is nil.
func syncRate(syncs func() uint64) func() float64 {
	if syncs == nil {
		return func() float64 { return 0 }
	}
	last, at := syncs(), time.Now()
	return func() float64 {
		n, now := syncs(), time.Now()
		d := now.Sub(at).Seconds()
		r := 0.0
		if d > 0 {
			r = float64(n-last) / d
		}
		last, at = n, now
		return r
	}
}

// readCount reads the count fusectl's file path holds. The file is read
// whole from a fresh open each time: fusectl's files cannot seek.
func readCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("adaptprocs: %w", err)
	}
	v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("adaptprocs: %s: %w", path, err)
	}
	return v, nil
}
