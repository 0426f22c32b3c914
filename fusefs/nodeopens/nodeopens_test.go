package nodeopens

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// TestMain fails the tests if, built with the tag lockdep, any of them
// took a lock out of the order (internal/lockorder).
func TestMain(m *testing.M) { os.Exit(lockorder.RunTests(m)) }

var (
	k1 = locks.Key{Dev: 1, Ino: 1}
	k2 = locks.Key{Dev: 1, Ino: 2}
	k3 = locks.Key{Dev: 2, Ino: 1}
	t0 = time.Unix(1_000_000, 0) // the tests' clock starts here
)

// at is t0 plus ms milliseconds: the tests' clock, never the real one.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// event is one call on a Set, and what it answered, as a word.
type event struct {
	name string
	do   func(s *Set) string
}

// rd admits a plain reader of key at ms, the mount passing through if
// mayPass, with no hold of its file.
func rd(key locks.Key, mayPass bool, ms int) event {
	return rdHeld(key, mayPass, ms, time.Time{})
}

// rdHeld is rd with the file's hold.
func rdHeld(key locks.Key, mayPass bool, ms int, fileHold time.Time) event {
	return event{fmt.Sprintf("reader %v pass=%v @%dms", key, mayPass, ms), func(s *Set) string {
		return s.AdmitReader(key, mayPass, at(ms), fileHold).String()
	}}
}

// ip admits an in-place handle of key, passing through if pt.
func ip(key locks.Key, pt bool) event {
	return event{fmt.Sprintf("in-place %v pt=%v", key, pt), func(s *Set) string {
		keep, ok := s.AdmitInPlace(key, pt)
		switch {
		case !ok:
			return "refused"
		case keep:
			return "keep"
		}
		return "ok"
	}}
}

// sh admits a handle of a pending write at ms, for the kernel if forKernel.
func sh(forKernel bool, ms int) event {
	return event{fmt.Sprintf("shared kernel=%v @%dms", forKernel, ms), func(s *Set) string {
		if s.AdmitShared(forKernel, at(ms)) {
			return "ok"
		}
		return "refused"
	}}
}

var (
	retire   = event{"retire", func(s *Set) string { s.Retire(); return "" }}
	shGone   = event{"shared gone", func(s *Set) string { s.SharedGone(); return "" }}
	ptGone   = event{"passthrough reader gone", func(s *Set) string { s.ReaderGone(Passthrough); return "" }}
	cGone    = event{"cached reader gone", func(s *Set) string { s.ReaderGone(Cached); return "" }}
	dGone    = event{"direct reader gone", func(s *Set) string { s.ReaderGone(Direct); return "" }}
	ipPtGone = event{"in-place pt gone", func(s *Set) string { s.InPlaceGone(true); return "" }}
	ipCGone  = event{"in-place cached gone", func(s *Set) string { s.InPlaceGone(false); return "" }}
)

// holdOff holds readers off passthrough until ms.
func holdOff(ms int) event {
	return event{fmt.Sprintf("hold off until @%dms", ms), func(s *Set) string { s.HoldOff(at(ms)); return "" }}
}

// TestRules: each rule of admission, as a sequence of calls on a fresh
// Set, what each answered, and the state it leaves.
func TestRules(t *testing.T) {
	const pass, nopass = true, false
	far := 10 * int(RetireHold/time.Millisecond) // after every hold
	for _, tc := range []struct {
		rule   string
		events []event
		want   []string // each event's answer ("" for those with none)
		state  State
	}{
		{"a reader alone passes through where the mount does",
			[]event{rd(k1, pass, 0)}, []string{"passthrough"}, PassingThrough},
		{"a reader alone reads through the cache where the mount does not pass through",
			[]event{rd(k1, nopass, 0)}, []string{"cached"}, Caching},
		{"passthrough readers of one version share the node",
			[]event{rd(k1, pass, 0), rd(k1, pass, 0)}, []string{"passthrough", "passthrough"}, PassingThrough},
		{"a reader of another version beside passthrough readers is refused",
			[]event{rd(k1, pass, 0), rd(k2, pass, 0)}, []string{"passthrough", "refused"}, PassingThrough},
		{"cached readers of one version share the node",
			[]event{rd(k1, nopass, 0), rd(k1, nopass, 0)}, []string{"cached", "cached"}, Caching},
		{"a reader of another version beside cached readers is refused",
			[]event{rd(k1, nopass, 0), rd(k2, nopass, 0)}, []string{"cached", "refused"}, Caching},
		{"direct readers may mix versions",
			[]event{holdOff(100), rd(k1, nopass, 0), rd(k2, nopass, 0), rd(k3, pass, 0)},
			[]string{"", "direct", "direct", "direct"}, Uncached},
		{"a reader of the same version beside direct readers, with no reason to read direct, reads through the cache",
			[]event{holdOff(100), rd(k1, nopass, 0), rd(k1, nopass, 200)}, []string{"", "direct", "cached"}, Caching},
		{"a reader joins the way passthrough readers read, whatever the hold",
			[]event{rd(k1, pass, 0), holdOff(far), rd(k1, pass, 10)}, []string{"passthrough", "", "passthrough"}, PassingThrough},
		{"no passthrough beside a pending write's handle: direct",
			[]event{sh(true, 0), rd(k1, pass, far)}, []string{"ok", "direct"}, Uncached},
		{"no cache beside a pending write's handle: direct",
			[]event{sh(true, 0), rd(k1, nopass, far)}, []string{"ok", "direct"}, Uncached},
		{"a daemon's own pending-write handle keeps readers direct too",
			[]event{sh(false, 0), rd(k1, nopass, far)}, []string{"ok", "direct"}, Uncached},
		{"no passthrough beside a direct reader",
			[]event{holdOff(100), rd(k1, pass, 0), rd(k1, pass, 200)}, []string{"", "direct", "direct"}, Uncached},
		{"a pending write's handle for the kernel is refused beside passthrough readers",
			[]event{rd(k1, pass, 0), sh(true, 0)}, []string{"passthrough", "refused"}, PassingThrough},
		{"a pending write's handle for the kernel is refused beside cached readers",
			[]event{rd(k1, nopass, 0), sh(true, 0)}, []string{"cached", "refused"}, Caching},
		{"a pending write's handle joins direct readers",
			[]event{holdOff(100), rd(k1, nopass, 0), sh(true, 0)}, []string{"", "direct", "ok"}, Uncached},
		{"a handle the kernel never sees joins passthrough readers",
			[]event{rd(k1, pass, 0), sh(false, 0), rd(k1, pass, 0)}, []string{"passthrough", "ok", "passthrough"}, PassingThrough},
		{"the node's hold keeps a reader off passthrough until it ends",
			[]event{holdOff(500), rd(k1, pass, 499), dGone, rd(k1, pass, 500)},
			[]string{"", "direct", "", "passthrough"}, PassingThrough},
		{"the node's hold keeps a reader off the cache too",
			[]event{holdOff(500), rd(k1, nopass, 499)}, []string{"", "direct"}, Uncached},
		{"the file's hold keeps a reader off passthrough until it ends",
			[]event{rdHeld(k1, pass, 0, at(300)), dGone, rdHeld(k1, pass, 300, at(300))},
			[]string{"direct", "", "passthrough"}, PassingThrough},
		{"a later hold is not shortened by an earlier one",
			[]event{holdOff(800), holdOff(100), rd(k1, pass, 700)}, []string{"", "", "direct"}, Uncached},
		{"a pending write's handle holds readers off for RetireHold after it opened",
			[]event{sh(true, 0), shGone, rd(k1, pass, int(RetireHold/time.Millisecond)-1), dGone,
				rd(k1, pass, int(RetireHold/time.Millisecond))},
			[]string{"ok", "", "direct", "", "passthrough"}, PassingThrough},
		{"the last reader gone, a reader of another version passes through",
			[]event{rd(k1, pass, 0), ptGone, rd(k2, pass, 0)}, []string{"passthrough", "", "passthrough"}, PassingThrough},
		{"the last cached reader gone, a pending write's handle is admitted",
			[]event{rd(k1, nopass, 0), cGone, sh(true, 0)}, []string{"cached", "", "ok"}, Uncached},
		{"a direct reader gone, the cached one stays counted",
			[]event{holdOff(100), rd(k1, nopass, 0), rd(k1, nopass, 200), dGone}, []string{"", "direct", "cached", ""}, Caching},
		{"every handle gone: idle",
			[]event{rd(k1, nopass, 0), sh(false, 0), cGone, shGone}, []string{"cached", "ok", "", ""}, Idle},
		{"a retired set admits no reader",
			[]event{retire, rd(k1, pass, far)}, []string{"", "refused"}, Idle},
		{"a retired set admits no in-place handle",
			[]event{retire, ip(k1, true)}, []string{"", "refused"}, Idle},
		{"a retired set admits no pending write's handle for the kernel",
			[]event{retire, sh(true, 0)}, []string{"", "refused"}, Idle},
		{"a retired set still counts a handle the kernel never sees",
			[]event{retire, sh(false, 0)}, []string{"", "ok"}, Uncached},
		{"a retired set's handles stay and go",
			[]event{rd(k1, pass, 0), retire, ptGone}, []string{"passthrough", "", ""}, Idle},
		{"in-place handles of one version and way share the node, the later ones keeping the cache",
			[]event{ip(k1, false), ip(k1, false)}, []string{"ok", "keep"}, Caching},
		{"in-place handles passing through",
			[]event{ip(k1, true), ip(k1, true)}, []string{"ok", "keep"}, PassingThrough},
		{"an in-place handle of another version is refused",
			[]event{ip(k1, true), ip(k2, true)}, []string{"ok", "refused"}, PassingThrough},
		{"an in-place handle of the other way of serving is refused",
			[]event{ip(k1, true), ip(k1, false)}, []string{"ok", "refused"}, PassingThrough},
		{"an in-place handle beside a plain reader is refused",
			[]event{rd(k1, pass, 0), ip(k1, true)}, []string{"passthrough", "refused"}, PassingThrough},
		{"an in-place handle beside a pending write's handle is refused",
			[]event{sh(false, 0), ip(k1, false)}, []string{"ok", "refused"}, Uncached},
		{"a pending write's handle for the kernel is refused beside in-place handles",
			[]event{ip(k1, false), sh(true, 0)}, []string{"ok", "refused"}, Caching},
		{"the last in-place handle gone, another version is admitted",
			[]event{ip(k1, false), ipCGone, ip(k2, true), ipPtGone}, []string{"ok", "", "ok", ""}, Idle},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var s Set
			var got []string
			for _, e := range tc.events {
				got = append(got, e.do(&s))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
			if st := s.State(); st != tc.state {
				t.Errorf("state %v, want %v", st, tc.state)
			}
		})
	}
}

// TestAttrValid: attributes are cached for the mount's timeout but while
// the node is in flux or retired; a CREATE's answer, but once retired.
func TestAttrValid(t *testing.T) {
	const timeout = time.Minute
	for _, tc := range []struct {
		name                string
		events              []event
		inFlux              bool
		attrValid, creation time.Duration
	}{
		{"idle", nil, false, timeout, timeout},
		{"readers", []event{rd(k1, true, 0)}, false, timeout, timeout},
		{"in flux", []event{sh(true, 0)}, true, 0, timeout},
		{"in flux for the daemon", []event{sh(false, 0)}, true, 0, timeout},
		{"no longer in flux", []event{sh(true, 0), shGone}, false, timeout, timeout},
		{"retired", []event{retire}, false, 0, 0},
		{"in flux and retired", []event{sh(true, 0), retire}, true, 0, 0},
	} {
		var s Set
		for _, e := range tc.events {
			e.do(&s)
		}
		if got := s.InFlux(); got != tc.inFlux {
			t.Errorf("%s: InFlux %v, want %v", tc.name, got, tc.inFlux)
		}
		if got := s.AttrValid(timeout); got != tc.attrValid {
			t.Errorf("%s: AttrValid %v, want %v", tc.name, got, tc.attrValid)
		}
		if got := s.CreatedAttrValid(timeout); got != tc.creation {
			t.Errorf("%s: CreatedAttrValid %v, want %v", tc.name, got, tc.creation)
		}
		if got := s.Retired(); got != (tc.creation == 0) {
			t.Errorf("%s: Retired %v", tc.name, got)
		}
	}
}

// TestOwnerViewFits: a node's size may be an owner's view while the node
// is in flux or none of its handles reads through the page cache or passes
// through.
func TestOwnerViewFits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []event
		want   bool
	}{
		{"idle", nil, true},
		{"a passthrough reader", []event{rd(k1, true, 0)}, false},
		{"a cached reader", []event{rd(k1, false, 0)}, false},
		{"a direct reader, the file held", []event{rdHeld(k1, false, 0, at(1000))}, true},
		{"a direct reader beside a pending write", []event{sh(true, 0), rd(k1, false, 1)}, true},
		{"the cached reader gone", []event{rd(k1, false, 0), cGone}, true},
		{"the passthrough reader gone", []event{rd(k1, true, 0), ptGone}, true},
		{"an in-place handle, cached", []event{ip(k1, false)}, false},
		{"an in-place handle passing through", []event{ip(k1, true)}, false},
		{"in flux", []event{sh(true, 0)}, true},
		{"no longer in flux, a cached reader left", []event{rd(k1, false, 0), sh(false, 1), shGone}, false},
	} {
		var s Set
		for _, e := range tc.events {
			e.do(&s)
		}
		if got := s.OwnerViewFits(); got != tc.want {
			t.Errorf("%s: OwnerViewFits %v, want %v", tc.name, got, tc.want)
		}
	}
}
