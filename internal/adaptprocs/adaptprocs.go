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
package adaptprocs

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"
)

// Policy decides the Ps from samples of the count of the connection's
// requests not yet answered.
type Policy struct {
	Many        int     // the Ps while requests overlap
	RaiseWindow int     // samples whose mean decides a raise
	RaiseAt     float64 // a mean at or past it raises to Many
	LowerWindow int     // samples whose mean decides a return to one P
	LowerBelow  float64 // a mean below it returns to one P
}

// DefaultPolicy is the policy for a daemon Go gives many Ps. A sequential
// writer's samples are 1 with a 2 now and then (a RELEASE answered after
// the next request came); four parallel writers' are 4 (measured:
// docs/PERFORMANCE.md). A raise takes three samples, a return a second's.
func DefaultPolicy(many int) Policy {
	return Policy{Many: many, RaiseWindow: 3, RaiseAt: 1.75, LowerWindow: 20, LowerBelow: 1.25}
}

// Interval is how often the count is sampled; IdleInterval, once it has
// read 0 for IdleAfter samples running at one P, so that an idle mount
// wakes the daemon twice a second, not twenty times (work after it is
// seen within one IdleInterval).
const (
	Interval     = 50 * time.Millisecond
	IdleInterval = 500 * time.Millisecond
	IdleAfter    = 20
)

// interval is the sampling interval after zeros samples of 0 running, at
// cur Ps.
func interval(zeros, cur int) time.Duration {
	if zeros >= IdleAfter && cur == 1 {
		return IdleInterval
	}
	return Interval
}

// Decide is the Ps to run with, running with cur, after samples (the
// newest last).
func (p Policy) Decide(cur int, samples []int) int {
	if cur < p.Many && mean(samples, p.RaiseWindow) >= p.RaiseAt {
		return p.Many
	}
	if cur > 1 && len(samples) >= p.LowerWindow && mean(samples, p.LowerWindow) < p.LowerBelow &&
		mean(samples, p.RaiseWindow) < p.RaiseAt { // not while they overlap now, after an idle while
		return 1
	}
	return cur
}

// mean is the mean of the last n samples (of fewer where there are fewer;
// 0 of none).
func mean(samples []int, n int) float64 {
	samples = samples[max(0, len(samples)-n):]
	if len(samples) == 0 {
		return 0
	}
	sum := 0
	for _, s := range samples {
		sum += s
	}
	return float64(sum) / float64(len(samples))
}

// WaitingFile is fusectl's count of the requests not yet answered of the
// connection whose mount's device has the minor number minor (fusectl
// names a connection by it).
func WaitingFile(minor uint32) string {
	return "/sys/fs/fuse/connections/" + strconv.FormatUint(uint64(minor), 10) + "/waiting"
}

// Start adapts GOMAXPROCS to the count in path, from one P, until stop is
// called; each change is logged. It changes nothing, and says why in the
// log, where fixed says so (-o procs asked for Ps, or the mount's device
// is unknown), where GOMAXPROCS is in the environment, where Go gives one
// P anyway, or where the count cannot be read (no fusectl mounted, a
// daemon not allowed to read it).
func Start(path string, fixed bool, logger *slog.Logger) (stop func()) {
	many := runtime.GOMAXPROCS(0)
	if fixed || os.Getenv("GOMAXPROCS") != "" || many == 1 {
		logger.Info("procs: fixed", "procs", many)
		return func() {}
	}
	if _, err := readCount(path); err != nil {
		logger.Info("procs: not adapted: the count of waiting requests is unread", "procs", many, "err", err)
		return func() {}
	}
	runtime.GOMAXPROCS(1)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		run(path, DefaultPolicy(many), done, logger)
	}()
	return func() {
		close(done)
		<-exited
	}
}

// run samples path (at interval) until done, setting GOMAXPROCS as p
// decides.
func run(path string, p Policy, done <-chan struct{}, logger *slog.Logger) {
	every := Interval
	tick := time.NewTicker(every)
	defer tick.Stop()
	samples := make([]int, 0, 2*max(p.RaiseWindow, p.LowerWindow))
	cur, zeros := 1, 0
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		n, err := readCount(path)
		if err != nil {
			logger.Warn("procs: the count of waiting requests went unread; back to every P", "procs", p.Many, "err", err)
			runtime.GOMAXPROCS(p.Many)
			return
		}
		if len(samples) == cap(samples) {
			samples = append(samples[:0], samples[len(samples)/2:]...)
		}
		samples = append(samples, n)
		if next := p.Decide(cur, samples); next != cur {
			runtime.GOMAXPROCS(next)
			logger.Info("procs", "procs", next, "waiting_mean", mean(samples, p.RaiseWindow))
			cur, samples = next, samples[:0] // each change is judged on samples after it
		}
		if n == 0 {
			zeros++
		} else {
			zeros = 0
		}
		if iv := interval(zeros, cur); iv != every {
			every = iv
			tick.Reset(every)
		}
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
