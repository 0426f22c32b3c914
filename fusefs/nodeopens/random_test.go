package nodeopens

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/internal/testseed"
	"github.com/realm-dev/realm/locks"
)

var (
	randomSeed = flag.Int64("nodeopens.seed", 0, "TestRandomized: replay the runs of this seed (0: from the clock)")
	randomRuns = flag.Int("nodeopens.runs", 400, "TestRandomized: runs of 80 events")
)

// open is a handle the randomized test holds open on its Set.
type open struct {
	kind      string // "reader", "in-place", "shared"
	mode      Mode   // a reader's or in-place handle's: Passthrough, Cached or Direct
	key       locks.Key
	forKernel bool
}

// model is one run of TestRandomized: the Set, the handles the test knows
// open, the hold the test computes from the events, and the trace a
// failure prints.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	s       Set
	mayPass bool // the mount passes through (one way for a run)
	now     time.Time
	hold    time.Time
	retired bool
	opens   []open
	trace   []string
	failed  error // the last event's answer broke a rule
}

// TestRandomized drives a Set with random events (admissions, releases,
// retires, holds, the clock moving on) and checks after each that the
// Set's answers and counts keep the kernel's rules, against the handles
// the test knows open.
func TestRandomized(t *testing.T) {
	seed := testseed.Seed(t, *randomSeed, "nodeopens.seed")
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < *randomRuns; run++ {
		m := &model{t: t, rng: rng, mayPass: rng.Intn(2) == 0, now: t0}
		for step := 0; step < 80; step++ {
			m.step()
			if err := m.check(); err != nil {
				t.Fatalf("seed %d (replay: -nodeopens.seed=%d), run %d, step %d: %v\ntrace:\n  %s",
					seed, seed, run, step, err, strings.Join(m.trace, "\n  "))
			}
		}
	}
}

var keys = []locks.Key{k1, k2, k3}

// step makes one random event and checks its answer.
func (m *model) step() {
	switch r := m.rng.Intn(20); {
	case r < 6:
		m.reader()
	case r < 9:
		m.inPlace()
	case r < 12:
		m.shared()
	case r < 17:
		m.release()
	case r < 18:
		m.trace = append(m.trace, "retire")
		m.s.Retire()
		m.retired = true
	case r < 19:
		until := m.now.Add(time.Duration(m.rng.Intn(1500)) * time.Millisecond)
		m.trace = append(m.trace, fmt.Sprintf("hold off until %v", until.Sub(t0)))
		m.s.HoldOff(until)
		if until.After(m.hold) {
			m.hold = until
		}
	default:
		m.now = m.now.Add(time.Duration(m.rng.Intn(1500)) * time.Millisecond)
		m.trace = append(m.trace, fmt.Sprintf("clock %v", m.now.Sub(t0)))
	}
}

// count is how many handles the test knows open that match.
func (m *model) count(match func(o open) bool) int {
	n := 0
	for _, o := range m.opens {
		if match(o) {
			n++
		}
	}
	return n
}

// servedAs is the handles that the kernel serves passing through (mode
// Passthrough) or through the page cache (Cached), and the versions they
// read.
func (m *model) servedAs(mode Mode) (n int, versions map[locks.Key]bool) {
	versions = make(map[locks.Key]bool)
	for _, o := range m.opens {
		if o.kind != "shared" && o.mode == mode {
			n++
			versions[o.key] = true
		}
	}
	return n, versions
}

// reader admits a plain reader and checks its answer against the rules.
func (m *model) reader() {
	key := keys[m.rng.Intn(len(keys))]
	var fileHold time.Time
	if m.rng.Intn(4) == 0 {
		fileHold = m.now.Add(time.Duration(m.rng.Intn(1000)-500) * time.Millisecond)
	}
	held := m.now.Before(m.hold) || m.now.Before(fileHold)
	pt, ptKeys := m.servedAs(Passthrough)
	cached, cachedKeys := m.servedAs(Cached)
	mode := m.s.AdmitReader(key, m.mayPass, m.now, fileHold)
	m.trace = append(m.trace, fmt.Sprintf("reader %v at %v (file held %v): %v", key, m.now.Sub(t0), fileHold.Sub(t0), mode))
	others := len(m.opens) - pt
	switch mode {
	case Refused:
		// Only a retired set, or another version served through one
		// backing file or one cache, refuses a reader.
		if !m.retired && (pt == 0 || ptKeys[key]) && (cached == 0 || cachedKeys[key]) {
			m.fail("a reader refused with no reason")
		}
		return
	case Passthrough:
		if !m.mayPass {
			m.fail("a reader passes through where the mount does not")
		}
		if pt == 0 && (others > 0 || held) {
			m.fail("a reader passes through beside %d other handles, held %v", others, held)
		}
	case Cached:
		if m.mayPass || held || m.count(func(o open) bool { return o.kind == "shared" }) > 0 {
			m.fail("a reader reads through the cache where the mount passes through, held or in flux")
		}
	}
	if m.retired {
		m.fail("a retired set admits a reader")
	}
	m.opens = append(m.opens, open{kind: "reader", mode: mode, key: key, forKernel: true})
}

// inPlace admits an in-place handle and checks its answer.
func (m *model) inPlace() {
	// Passing through only where the mount does (fusefs asks so).
	key, pt := keys[m.rng.Intn(len(keys))], m.mayPass && m.rng.Intn(2) == 0
	keep, ok := m.s.AdmitInPlace(key, pt)
	m.trace = append(m.trace, fmt.Sprintf("in-place %v pt=%v: keep %v ok %v", key, pt, keep, ok))
	inPlace := m.count(func(o open) bool { return o.kind == "in-place" })
	// In-place handles join only in-place handles of their version and way.
	mismatch := m.count(func(o open) bool { return o.kind != "in-place" || o.key != key || (o.mode == Passthrough) != pt })
	if !ok {
		if !m.retired && mismatch == 0 {
			m.fail("an in-place handle refused with no reason")
		}
		return
	}
	if m.retired || mismatch > 0 {
		m.fail("an in-place handle admitted beside %d other handles, retired %v", mismatch, m.retired)
	}
	if keep != (inPlace > 0) {
		m.fail("keep %v with %d in-place handles open", keep, inPlace)
	}
	mode := Cached
	if pt {
		mode = Passthrough
	}
	m.opens = append(m.opens, open{kind: "in-place", mode: mode, key: key, forKernel: true})
}

// shared admits a pending write's handle and checks its answer.
func (m *model) shared() {
	forKernel := m.rng.Intn(4) != 0
	ok := m.s.AdmitShared(forKernel, m.now)
	m.trace = append(m.trace, fmt.Sprintf("shared kernel=%v at %v: %v", forKernel, m.now.Sub(t0), ok))
	pt, _ := m.servedAs(Passthrough)
	cached, _ := m.servedAs(Cached)
	if !ok {
		if !forKernel || !m.retired && pt == 0 && cached == 0 {
			m.fail("a pending write's handle refused with no reason")
		}
		return
	}
	if forKernel && m.retired {
		m.fail("a retired set admits a pending write's handle for the kernel")
	}
	if until := m.now.Add(RetireHold); until.After(m.hold) {
		m.hold = until
	}
	m.opens = append(m.opens, open{kind: "shared", forKernel: forKernel})
}

// release lets go of a random open handle.
func (m *model) release() {
	if len(m.opens) == 0 {
		return
	}
	i := m.rng.Intn(len(m.opens))
	o := m.opens[i]
	m.opens = append(m.opens[:i], m.opens[i+1:]...)
	m.trace = append(m.trace, fmt.Sprintf("release %s %v %v", o.kind, o.mode, o.key))
	switch o.kind {
	case "reader":
		m.s.ReaderGone(o.mode)
	case "in-place":
		m.s.InPlaceGone(o.mode == Passthrough)
	case "shared":
		m.s.SharedGone()
	}
}

func (m *model) fail(format string, args ...any) {
	m.failed = fmt.Errorf(format, args...)
}

// check checks the invariants over the handles open and the Set's counts.
func (m *model) check() error {
	if m.failed != nil {
		return m.failed
	}
	pt, ptKeys := m.servedAs(Passthrough)
	cached, cachedKeys := m.servedAs(Cached)
	kernelShared := m.count(func(o open) bool { return o.kind == "shared" && o.forKernel })
	// The kernel serves one inode's opens alike while any passes through.
	if pt > 0 && pt != m.count(func(o open) bool { return o.forKernel }) {
		return fmt.Errorf("%d handles pass through beside %d other handles of the kernel", pt, m.count(func(o open) bool { return o.forKernel })-pt)
	}
	// One backing file, one page cache: one version.
	if len(ptKeys) > 1 || len(cachedKeys) > 1 {
		return fmt.Errorf("readers of several versions share the node: passthrough %v, cached %v", ptKeys, cachedKeys)
	}
	// A direct-I/O write handle must not share the cache.
	if kernelShared > 0 && (pt > 0 || cached > 0) {
		return fmt.Errorf("%d pending write's handles beside %d passthrough and %d cached readers", kernelShared, pt, cached)
	}
	want := Counts{
		Readers:  m.count(func(o open) bool { return o.kind != "shared" }),
		InPlace:  m.count(func(o open) bool { return o.kind == "in-place" }),
		Cached:   cached,
		Shared:   m.count(func(o open) bool { return o.kind == "shared" }),
		Uncached: len(m.opens) - pt,
	}
	if got := m.s.Counts(); got != want {
		return fmt.Errorf("counts %+v, want %+v", got, want)
	}
	wantState := Idle
	switch {
	case pt > 0:
		wantState = PassingThrough
	case cached > 0:
		wantState = Caching
	case len(m.opens) > 0:
		wantState = Uncached
	}
	if got := m.s.State(); got != wantState {
		return fmt.Errorf("state %v, want %v", got, wantState)
	}
	if m.s.Retired() != m.retired || m.s.InFlux() != (want.Shared > 0) {
		return fmt.Errorf("retired %v in flux %v, want %v %v", m.s.Retired(), m.s.InFlux(), m.retired, want.Shared > 0)
	}
	return nil
}
