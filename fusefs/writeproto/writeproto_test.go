package writeproto

import (
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/internal/testseed"
)

// proc is a test's stand-in for fusefs: it performs the machine's
// actions on a model of the file (what is committed, what is kept beside
// it) instead of system calls, in the order the machine's tables declare:
// a test fails at once on a call they reject (newProc).
type proc struct {
	w       Write
	flushed map[*Handle]bool // a FLUSH of the handle came
	// behind: the file was changed behind the mount since the owner last
	// saw it commit; unlinked: its name leads nowhere.
	behind, unlinked bool
	links            uint64
	commits, copies  int
	verdicts         []Verdict
}

// newProc is a proc whose write fails t on any call its tables reject.
func newProc(t *testing.T) *proc {
	p := &proc{}
	p.w.OnViolation = func(err error) {
		t.Helper()
		t.Fatal(err)
	}
	return p
}

// commit performs a commit as fusefs does, returning the verdict (-1: nothing to commit).
func (p *proc) commit() Verdict {
	switch p.w.Commit() {
	case StartNothing:
		return -1
	case StartRefuse:
		p.w.TempGone() // fail: the temp goes, EIO
		return FailCommit
	}
	name := NameSame
	switch {
	case p.unlinked:
		name = NameMissing
	case p.behind:
		name = NameChanged
	}
	v := p.w.Judge(name, max(p.links, 1))
	p.verdicts = append(p.verdicts, v)
	switch v {
	case Conflict:
		p.copies++
		p.w.TempGone()
		p.behind = false // rebased on the file as it is
	case CommitRename, CommitInPlace:
		p.commits++
		p.w.Committed()
	default:
		p.w.TempGone()
	}
	return v
}

// open opens a handle, making the empty temp a truncation needs.
func (p *proc) open(o Open) *Handle {
	h := p.w.Open(o)
	if h.Truncates() {
		p.w.TempGone()
		p.w.TempMade()
		p.w.Truncated(h)
	}
	return h
}

// write writes n bytes through h, with O_APPEND as opened (failed: the
// write failed).
func (p *proc) write(h *Handle, n int, failed syscall.Errno) Route {
	return p.writeAs(h, n, h.open.Append, failed)
}

// writeAs is write with O_APPEND as the kernel sent it (appends): fcntl's
// F_SETFL may have changed it since the open.
func (p *proc) writeAs(h *Handle, n int, appends bool, failed syscall.Errno) Route {
	if p.w.WriteRoute(h, appends, false) == RouteInPlace {
		p.w.AppendedInPlace(h, n)
		return RouteInPlace
	}
	if !p.w.HasTemp() {
		p.w.TempMade()
	}
	p.w.TempWrite(h, appends)
	p.w.TempWritten(n, failed)
	return RouteTemp
}

// truncate truncates through h.
func (p *proc) truncate(h *Handle, errno syscall.Errno) {
	p.w.Changing(h)
	if !p.w.HasTemp() {
		p.w.TempMade()
	}
	p.w.TempChange()
	p.w.ChangeDone(errno)
}

// close is a close by the opener (or not) with facts; it returns what the
// close did and, if it killed, what the kill did.
func (p *proc) close(h *Handle, byOpener bool, f FlushFacts) (FlushAction, KillAction) {
	if p.flushed == nil {
		p.flushed = make(map[*Handle]bool)
	}
	p.flushed[h] = true
	if !CloseMayCommit(byOpener) || !p.w.FlushStart(h) {
		return FlushNone, -1
	}
	switch a := p.w.Flush(h, f); a {
	case FlushCommit:
		p.commit()
		return a, -1
	case FlushKilled:
		k := p.w.Killed(h)
		switch k {
		case KillCommit:
			p.commit()
		case KillRecover:
			p.copies++
			p.w.TempGone()
		}
		return a, k
	default:
		return a, -1
	}
}

// release releases h.
func (p *proc) release(h *Handle) ReleaseAction {
	a := p.w.Release(h, p.flushed[h])
	switch a {
	case ReleaseDropTruncate:
		p.w.TempGone()
	case ReleaseCommit:
		p.commit()
	}
	p.w.Released(h)
	return a
}

var (
	rewrite = Open{Write: true, Truncate: true}
	inPlace = Open{Write: true}
	appends = Open{Write: true, Append: true}
	reader  = Open{}
	clear   = FlushFacts{}
)

func TestShellRedirectCommitsAtTheCommandsExit(t *testing.T) {
	// cmd > f: the shell opens f, dup2s it to 1 and closes the first
	// descriptor; cmd writes and exits.
	p := newProc(t)
	h := p.open(rewrite)
	if a, _ := p.close(h, true, FlushFacts{OthersOpen: true}); a != FlushNone || p.w.State() != Pending {
		t.Fatalf("the shell's close of the first descriptor: %v, state %v; want nothing, pending", a, p.w.State())
	}
	p.write(h, 3, 0)
	if a, _ := p.close(h, true, clear); a != FlushCommit || p.w.State() != Clean || p.commits != 1 {
		t.Fatalf("cmd's exit: %v, state %v, %d commits; want commit, clean, 1", a, p.w.State(), p.commits)
	}
	if a := p.release(h); a != ReleaseCommit || p.commits != 1 || p.w.State() != Idle {
		t.Fatalf("release: %v, %d commits, state %v", a, p.commits, p.w.State())
	}
}

// TestCloseAfterFsyncNeedsNoScan: an editor's save writes, fsyncs and
// closes. The fsync's commit made what it wrote the file and took its
// handle out of the writers, so the close asks for no scan of the
// opener's descriptors (FlushStart false), and another process of the
// owner that writes and closes commits at its own close, not at the
// first one's RELEASE.
func TestCloseAfterFsyncNeedsNoScan(t *testing.T) {
	p := newProc(t)
	h := p.open(rewrite)
	p.write(h, 3, 0)
	if v := p.commit(); v != CommitRename || p.w.State() != Clean {
		t.Fatalf("fsync: %v, state %v; want rename, clean", v, p.w.State())
	}
	if p.w.FlushStart(h) {
		t.Fatal("the close after the fsync's commit asks for a scan")
	}
	if h.Writing() {
		t.Fatal("the saved handle is still among the writers after its close")
	}
	other := p.open(Open{Write: true, Opener: 2})
	p.write(other, 2, 0)
	if a, _ := p.close(other, true, clear); a != FlushCommit || p.commits != 2 {
		t.Fatalf("the other process's close: %v, %d commits; want commit, 2", a, p.commits)
	}
	// A write through a descriptor the saver still held joins again.
	p.write(h, 1, 0)
	if !h.Writing() || !p.w.FlushStart(h) {
		t.Fatal("a write after the clean close does not count the handle again")
	}
}

// TestWritersLeaveAtACommit: two processes of one owner write one file
// (one temp). A commit makes what both wrote the file, so a process that
// has written nothing since holds the other's close back no more (it may
// hold descriptors yet); one that writes again does (TestModel seed
// 544311063004).
func TestWritersLeaveAtACommit(t *testing.T) {
	p := newProc(t)
	a := p.open(Open{Write: true, Opener: 1})
	b := p.open(Open{Write: true, Opener: 2})
	p.write(a, 3, 0)
	p.write(b, 2, 0)
	if v := p.commit(); v != CommitRename { // b's fsync
		t.Fatalf("fsync: %v", v)
	}
	if a.Writing() || b.Writing() || p.w.Writers() != 0 {
		t.Fatalf("after the commit: a writing %v, b writing %v, %d writers", a.Writing(), b.Writing(), p.w.Writers())
	}
	p.write(b, 1, 0)
	if act, _ := p.close(b, true, clear); act != FlushCommit || p.commits != 2 {
		t.Fatalf("b's last close beside a, which wrote before the commit only: %v, %d commits; want commit, 2", act, p.commits)
	}
	b2 := p.open(Open{Write: true, Opener: 2})
	p.write(a, 1, 0)
	p.write(b2, 1, 0)
	if act, _ := p.close(b2, true, clear); act != FlushNone || p.commits != 2 {
		t.Fatalf("b's close while a has written since the commit: %v, %d commits; want nothing, 2", act, p.commits)
	}
}

func TestFlushTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byOpener bool
		facts    FlushFacts
		other    bool // another handle of the owner has written and is still held
		want     FlushAction
	}{
		{"opener's last close", true, clear, false, FlushCommit},
		{"a child's close of an inherited descriptor", false, clear, false, FlushNone},
		{"another descriptor of the same open", true, FlushFacts{OthersOpen: true}, false, FlushNone},
		{"the opener's descriptors unknown", true, FlushFacts{Unknown: true}, false, FlushNone},
		{"a write(2) in flight in another thread", true, FlushFacts{WriteGoesOn: true}, false, FlushNone},
		{"another process of the owner writing", true, clear, true, FlushNone},
		{"killed", true, FlushFacts{Signal: 9}, false, FlushKilled},
		{"killed beside another writer", true, FlushFacts{Signal: 9}, true, FlushKilled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t)
			h := p.open(inPlace)
			p.write(h, 1, 0)
			if tc.other {
				other := inPlace
				other.Opener = 2 // another process
				o := p.open(other)
				p.write(o, 1, 0)
			}
			if a, _ := p.close(h, tc.byOpener, tc.facts); a != tc.want {
				t.Fatalf("close: %v, want %v", a, tc.want)
			}
			if committed := p.commits == 1; committed != (tc.want == FlushCommit) {
				t.Errorf("committed %v after %v", committed, tc.want)
			}
		})
	}
}

// TestSiblingHandlesCommitAtTheLastClose: one process opens a file twice
// alike (python: a = open(p, "r+b"); b = open(p, "r+b")), writes through
// both and closes a, then b. At a's close the scan sees b's descriptor,
// which it cannot tell from a's: nothing commits. At b's close it sees
// none of that kind, so a's is gone too: b's close commits both handles'
// bytes, though a's RELEASE may not have come, and both holds are told
// they are closing. A handle of another kind (a reader) or of another
// process is not taken along.
func TestSiblingHandlesCommitAtTheLastClose(t *testing.T) {
	p := newProc(t)
	var ha, hb, hr, ho hold
	mk := func(o Open, opener uint32, hd *hold) *Handle {
		o.Opener, o.Kind, o.Hold = opener, kindOf(o), hd
		return p.open(o)
	}
	a := mk(inPlace, 1, &ha)
	b := mk(inPlace, 1, &hb)
	r := mk(reader, 1, &hr)
	p.write(a, 2, 0)
	p.write(b, 2, 0)
	if act, _ := p.close(a, true, FlushFacts{OthersOpen: true}); act != FlushNone || ha.closing {
		t.Fatalf("a's close beside b: %v, a closing %v; want nothing, not closing", act, ha.closing)
	}
	if act, _ := p.close(b, true, clear); act != FlushCommit || p.commits != 1 {
		t.Fatalf("b's close: %v, %d commits; want commit, 1", act, p.commits)
	}
	if !ha.closing || !hb.closing || hr.closing {
		t.Errorf("holds closing: a %v, b %v, reader %v; want a and b", ha.closing, hb.closing, hr.closing)
	}
	// Another process's handle of the same kind is its own.
	o := mk(inPlace, 2, &ho)
	p.write(o, 1, 0)
	c := mk(inPlace, 1, &hold{})
	p.write(c, 1, 0)
	if act, _ := p.close(c, true, clear); act != FlushNone || ho.closing {
		t.Fatalf("a close beside another process's writer: %v, its hold closing %v; want nothing, not closing", act, ho.closing)
	}
	// A write through a closing handle makes it active again.
	p.write(a, 1, 0)
	if ha.closing || ha.active != 1 {
		t.Errorf("after a write through a: closing %v, active %d; want false, 1", ha.closing, ha.active)
	}
	_ = r
}

// TestIdleCloseIsClosing: a close with nothing to commit marks the hold
// closing without a scan.
func TestIdleCloseIsClosing(t *testing.T) {
	p := newProc(t)
	h, hd := p.openHeld(inPlace)
	if act, _ := p.close(h, true, clear); act != FlushNone || !hd.closing {
		t.Fatalf("idle close: %v, closing %v; want nothing, closing", act, hd.closing)
	}
}

// TestReleaseIsClosing: a close whose descriptors could not be told (a
// close at exit: the fd table is gone) leaves the hold as it is; the
// RELEASE marks it closing before the commit it starts, so that another
// owner's open waits for that commit rather than only a grace (CI,
// 2026-12-06: a race-built daemon's commit at the RELEASE of `sh -c
// "echo new > f"` outlasted the grace, and the next writer got EBUSY).
func TestReleaseIsClosing(t *testing.T) {
	p := newProc(t)
	h, hd := p.openHeld(rewrite)
	p.write(h, 4, 0)
	if act, _ := p.close(h, true, FlushFacts{Unknown: true}); act != FlushNone || hd.closing {
		t.Fatalf("a close that could not be told: %v, closing %v; want nothing, not closing", act, hd.closing)
	}
	if a := p.w.Release(h, true); a != ReleaseCommit || !hd.closing {
		t.Fatalf("release: %v, closing %v; want a commit, closing", a, hd.closing)
	}
	p.commit()
	p.w.Released(h)
}

// openHeld opens o with a hold that records what the machine tells it.
func (p *proc) openHeld(o Open) (*Handle, *hold) {
	hd := new(hold)
	o.Hold = hd
	return p.open(o), hd
}

// hold records what the machine tells a handle's lock hold.
type hold struct {
	closing bool
	active  int
}

func (h *hold) Closing() { h.closing = true }
func (h *hold) Active()  { h.closing = false; h.active++ }

// kindOf is the descriptor kind fusefs gives an open: what a scan of the
// opener's descriptors can tell (write access, O_APPEND).
func kindOf(o Open) uint32 {
	var k uint32
	if o.Write {
		k |= 1
	}
	if o.Append {
		k |= 2
	}
	return k
}

func TestReaderNeverHoldsACommitBack(t *testing.T) {
	// exec 3<g; echo new > g; exec 3<&-: the reader beside the rewrite.
	p := newProc(t)
	r := p.open(reader)
	h := p.open(rewrite)
	p.write(h, 4, 0)
	if a, _ := p.close(h, true, clear); a != FlushCommit || p.w.State() != Clean {
		t.Fatalf("the writer's close beside a reader: %v, state %v; want commit, clean", a, p.w.State())
	}
	if r.Writing() || p.w.Writers() != 0 {
		t.Fatalf("a reader counts among the writers")
	}
	p.release(h)
	// echo more >> g: the same owner's next open, before the reader's release.
	a := p.open(appends)
	if route := p.write(a, 5, 0); route != RouteInPlace {
		t.Errorf("append after the commit: %v, want in place", route)
	}
	p.behind = false
	p.release(r)
	if rel := p.release(a); rel != ReleaseCommit || p.copies != 0 {
		t.Fatalf("last release: %v, %d copies; want a commit and no conflict", rel, p.copies)
	}
}

func TestReleaseTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flushed bool
		write   bool
		want    ReleaseAction
	}{
		{"an O_TRUNC open that failed in the kernel", false, false, ReleaseDropTruncate},
		{"an O_TRUNC open that was closed", true, false, ReleaseCommit},
		{"written through without a FLUSH (mmap)", false, true, ReleaseCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t)
			h := p.open(rewrite)
			if tc.write {
				p.write(h, 1, 0)
			}
			if tc.flushed {
				p.close(h, false, clear)
			}
			if a := p.release(h); a != tc.want {
				t.Fatalf("release: %v, want %v", a, tc.want)
			}
		})
	}
	t.Run("an earlier handle's release", func(t *testing.T) {
		p := newProc(t)
		h, o := p.open(inPlace), p.open(inPlace)
		p.write(h, 1, 0)
		if a := p.release(h); a != ReleaseNone || p.w.State() != Pending {
			t.Fatalf("release beside another handle: %v, state %v", a, p.w.State())
		}
		if a := p.release(o); a != ReleaseCommit || p.commits != 1 {
			t.Fatalf("last release: %v, %d commits", a, p.commits)
		}
	})
}

func TestKilledTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		open   Open
		ops    func(p *proc, h *Handle)
		shared bool // another write handle shares the write (a reader always does)
		want   KillAction
	}{
		{"a new file", Open{Write: true, Truncate: true, Fresh: true}, func(p *proc, h *Handle) { p.write(h, 5, 0) }, false, KillCommit},
		{"a rewrite of old content", rewrite, func(p *proc, h *Handle) { p.write(h, 5, 0) }, false, KillRecover},
		{"in place over old content", inPlace, func(p *proc, h *Handle) { p.write(h, 5, 0) }, false, KillRecover},
		{"appends in place", appends, func(p *proc, h *Handle) { p.write(h, 5, 0) }, false, KillInFile},
		{"appends to a temp", appends, func(p *proc, h *Handle) {
			p.w.TempMade() // a rewrite pending of the owner's: appends go to its end
			p.w.TempWrite(nil, true)
			p.w.TempWritten(1, 0)
			p.write(h, 5, 0)
		}, false, KillCommit},
		{"an append after a truncate", appends, func(p *proc, h *Handle) { p.truncate(h, 0); p.write(h, 5, 0) }, false, KillRecover},
		{"O_APPEND cleared, a write at an offset", appends, func(p *proc, h *Handle) { p.writeAs(h, 5, false, 0) }, false, KillRecover},
		{"a failed write to a new file", Open{Write: true, Fresh: true}, func(p *proc, h *Handle) { p.write(h, 5, syscall.EIO) }, false, KillRecover},
		{"beside another write handle", inPlace, func(p *proc, h *Handle) { p.write(h, 5, 0) }, true, KillNothing},
		{"beside a reader of the owner", inPlace, func(p *proc, h *Handle) { p.write(h, 5, 0) }, false, KillRecover},
		{"nothing written", inPlace, func(p *proc, h *Handle) {}, false, KillNothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t)
			h := p.open(tc.open)
			p.open(reader)
			if tc.shared {
				p.open(Open{Write: true})
			}
			tc.ops(p, h)
			dirty := p.w.Dirty()
			a, k := p.close(h, true, FlushFacts{Signal: 9})
			if tc.want == KillNothing && !dirty && !h.writing {
				if a != FlushNone {
					t.Fatalf("close: %v", a)
				}
				return
			}
			if a != FlushKilled || k != tc.want {
				t.Fatalf("close: %v, %v; want killed, %v", a, k, tc.want)
			}
			if k == KillNothing && p.w.Dirty() != dirty {
				t.Errorf("the bytes of a killed writer beside another handle were dropped")
			}
		})
	}
}

// TestKillAwaits: a killed opener's kill rule waits for the RELEASEs on
// their way (every other write handle closing) and for nothing else; once
// they land the writer is alone, and its bytes are judged as its own.
func TestKillAwaits(t *testing.T) {
	other := Open{Write: true, Opener: 2}
	for _, tc := range []struct {
		name  string
		setup func(p *proc) // opens the handles beside the killed one
		want  bool
	}{
		{"alone", func(p *proc) {}, false},
		{"beside a reader", func(p *proc) { p.open(reader) }, false},
		{"beside a closing reader", func(p *proc) { p.close(p.open(Open{Opener: 2}), true, FlushFacts{}) }, false},
		{"beside a write handle", func(p *proc) { p.write(p.open(other), 1, 0) }, false},
		{"beside a closing write handle", func(p *proc) {
			o := p.open(other)
			p.write(o, 1, 0)
			p.close(o, true, FlushFacts{})
		}, true},
		{"beside a closing and an open write handle", func(p *proc) {
			o := p.open(other)
			p.write(o, 1, 0)
			p.close(o, true, FlushFacts{})
			p.open(Open{Write: true, Opener: 3})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t)
			h := p.open(Open{Write: true, Opener: 1})
			p.write(h, 5, 0)
			tc.setup(p)
			if got := p.w.KillAwaits(h); got != tc.want {
				t.Fatalf("KillAwaits = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("the release landed", func(t *testing.T) {
		p := newProc(t)
		h := p.open(Open{Write: true, Opener: 1})
		o := p.open(other)
		p.write(o, 1, 0)
		p.write(h, 5, 0)
		if a, _ := p.close(o, true, FlushFacts{}); a != FlushNone {
			t.Fatalf("close beside a writer: %v", a)
		}
		p.release(o)
		if p.w.KillAwaits(h) {
			t.Fatal("KillAwaits after the release: true")
		}
		if a, k := p.close(h, true, FlushFacts{Signal: 9}); a != FlushKilled || k != KillRecover {
			t.Fatalf("kill: %v, %v; want killed, %v", a, k, KillRecover)
		}
	})
}

func TestJudgeTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gone  bool
		now   Name
		links uint64
		want  Verdict
	}{
		{"unchanged", false, NameSame, 1, CommitRename},
		{"hard links", false, NameSame, 2, CommitInPlace},
		{"changed behind the mount", false, NameChanged, 1, Conflict},
		{"unlinked", false, NameMissing, 1, DropUnlinked},
		{"look failed", false, NameUnknown, 1, FailCommit},
		{"removed through the mount", true, NameChanged, 1, DropGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Write
			if tc.gone {
				w.Removed()
			}
			if v := w.Judge(tc.now, tc.links); v != tc.want {
				t.Fatalf("Judge = %v, want %v", v, tc.want)
			}
		})
	}
}

func TestWriteRouteTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    Open
		appends bool // the write's O_APPEND, as the kernel sent it
		temp    bool
		failed  bool
		setID   bool
		want    Route
	}{
		{"append", appends, true, false, false, false, RouteInPlace},
		{"append, a rewrite pending", appends, true, true, false, false, RouteTemp},
		{"append after a failed write", appends, true, false, true, false, RouteTemp},
		{"append to a set-id file", appends, true, false, false, true, RouteTemp},
		{"O_APPEND|O_TRUNC", Open{Write: true, Append: true, Truncate: true}, true, false, false, false, RouteTemp},
		{"in place", inPlace, false, false, false, false, RouteTemp},
		// fcntl(F_SETFL) changes O_APPEND after the open: the write's flag rules.
		{"O_APPEND cleared", appends, false, false, false, false, RouteTemp},
		{"O_APPEND set", inPlace, true, false, false, false, RouteInPlace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Write
			h := w.Open(tc.open)
			if tc.temp {
				w.TempMade()
			}
			if tc.failed {
				w.Fail(syscall.EIO)
			}
			if r := w.WriteRoute(h, tc.appends, tc.setID); r != tc.want {
				t.Fatalf("route = %v, want %v", r, tc.want)
			}
		})
	}
}

func TestFailedTempIsNeverCommitted(t *testing.T) {
	p := newProc(t)
	h := p.open(inPlace)
	p.write(h, 3, syscall.ENOSPC)
	if p.w.State() != Failed {
		t.Fatalf("state %v after a failed write, want failed", p.w.State())
	}
	if _, _ = p.close(h, true, clear); p.commits != 0 || p.w.State() != Clean {
		t.Fatalf("%d commits, state %v; want none, clean (the temp dropped)", p.commits, p.w.State())
	}
}

func TestTruncateByName(t *testing.T) {
	p := newProc(t)
	t1 := p.open(inPlace)
	p.truncate(t1, 0)
	if !p.w.TruncateCommits() {
		t.Errorf("a truncate(2) with no other writer does not commit")
	}
	h := p.open(inPlace)
	p.write(h, 1, 0)
	if p.w.TruncateCommits() {
		t.Errorf("a truncate(2) beside a writing handle commits")
	}
}

var seedFlag = flag.Int64("writeproto.seed", 0, "seed of TestRandomized (0: from the clock)")

// TestRandomized drives one owner's write with random events from several
// processes and checks the protocol's promises after each.
func TestRandomized(t *testing.T) {
	seed := testseed.Seed(t, *seedFlag, "writeproto.seed")
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < 2000; run++ {
		randomRun(t, rng, run)
		if t.Failed() {
			t.Fatalf("seed %d, run %d", seed, run)
		}
	}
}

type live struct {
	h      *Handle
	opener int // its process
	open   Open
	wrote  bool // bytes went through it
	// held: its opener still holds a descriptor of it (until a close by
	// the opener that the scan said was its last).
	held bool
}

// runner is one run of TestRandomized: a proc, the handles open, and the
// trace a failure prints.
type runner struct {
	t     *testing.T
	rng   *rand.Rand
	run   int
	p     *proc
	hs    []*live
	trace []string
}

func (r *runner) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Errorf("run %d: "+format+"\ntrace:\n  %s", append([]any{r.run}, append(args, strings.Join(r.trace, "\n  "))...)...)
}

func (r *runner) log(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

func randomRun(t *testing.T, rng *rand.Rand, run int) {
	r := &runner{t: t, rng: rng, run: run, p: &proc{}}
	p := r.p
	// Every call of a valid sequence is accepted; one run in eight ends
	// with an invalid call injected, which must be reported.
	p.w.OnViolation = func(err error) { r.fail("%v", err) }
	injectAt := -1
	if rng.Intn(8) == 0 {
		injectAt = rng.Intn(40)
	}
	for step := 0; step < 40 && !t.Failed(); step++ {
		if step == injectAt {
			r.inject()
			return
		}
		r.step()
		r.invariants()
	}
	// The last release leaves nothing uncommitted, whatever came before.
	for len(r.hs) > 0 {
		p.release(r.hs[0].h)
		r.hs = r.hs[1:]
	}
	if p.w.State() != Idle || p.w.Dirty() || p.w.HasTemp() {
		r.fail("after the last release: %v, dirty %v, temp %v", p.w.State(), p.w.Dirty(), p.w.HasTemp())
	}
	if p.w.Err() != nil {
		r.fail("a valid sequence was rejected: %v", p.w.Err())
	}
}

// inject makes a call the machine must reject now.
func (r *runner) inject() {
	w := &r.p.w
	w.OnViolation = nil
	ev, h := injectInvalid(r.rng, w, r.hs)
	fire(w, ev, h, r.rng.Intn(variants(ev)))
	r.log("injected %v (state %v)", ev, w.State())
	if w.Err() == nil {
		r.fail("the injected %v was accepted", ev)
	}
}

var randomOpens = []Open{reader, rewrite, inPlace, appends, {Write: true, Truncate: true, Fresh: true}, {Write: true, Fresh: true}, {Write: true, Append: true, Fresh: true}}

// step makes one random event of the kernel's, or of the file's.
func (r *runner) step() {
	p, rng := r.p, r.rng
	ev := rng.Intn(10)
	if len(r.hs) == 0 {
		ev = 0
	}
	var l *live
	var i int
	if len(r.hs) > 0 {
		i = rng.Intn(len(r.hs))
		l = r.hs[i]
	}
	switch ev {
	case 0: // open
		o := randomOpens[rng.Intn(len(randomOpens))]
		opener := rng.Intn(3)
		o.Opener, o.Kind = uint32(opener+1), kindOf(o)
		nl := &live{h: p.open(o), opener: opener, open: o, held: true}
		r.hs = append(r.hs, nl)
		r.log("open %+v by %d", o, nl.opener)
		if o.Truncate && p.w.State() != Pending && p.w.State() != Gone {
			r.fail("a truncating open leaves state %v", p.w.State())
		}
	case 1, 2: // write
		r.write(l, i)
	case 3: // truncate through the handle
		if !l.open.Write {
			return
		}
		p.truncate(l.h, 0)
		l.wrote = true
		r.log("ftruncate h%d", i)
	case 4: // fsync
		v := p.commit()
		r.log("fsync h%d -> %v", i, v)
		if p.w.Dirty() && p.w.Failure() == 0 {
			r.fail("fsync left the write %v", p.w.State())
		}
		// What was written is the file now: no handle holds another
		// process's close back until a change comes through it again.
		if v == CommitRename || v == CommitInPlace || v == CommitPublish {
			for _, o := range r.hs {
				if o.h.Writing() {
					r.fail("h%d is still among the writers after the commit", slices.Index(r.hs, o))
				}
			}
		}
	case 5, 6: // close (FLUSH), then RELEASE as the kernel would
		r.close(l, i)
		if rng.Intn(2) != 0 { // else the release comes later
			r.release(i)
		}
	case 7: // RELEASE
		r.release(i)
	case 8: // a change behind the mount
		p.behind = true
		r.log("change behind the mount")
	case 9: // a rename of the file through the mount; rarely, its name removed
		if rng.Intn(5) == 0 {
			p.w.Removed()
			r.log("name removed")
		} else {
			p.w.Renamed()
			r.log("renamed")
		}
	}
}

// write writes through l (the i-th handle), if it may.
func (r *runner) write(l *live, i int) {
	p := r.p
	if !l.open.Write {
		return
	}
	var failed syscall.Errno
	if r.rng.Intn(20) == 0 {
		failed = syscall.ENOSPC
	}
	// Now and then fcntl(F_SETFL) has flipped O_APPEND.
	appends := l.open.Append != (r.rng.Intn(8) == 0)
	rt := p.writeAs(l.h, 1+r.rng.Intn(3), appends, failed)
	l.wrote = true
	r.log("write h%d (append %v: %v, failed %v) -> %v", i, appends, rt, failed, p.w.State())
	if rt == RouteTemp && p.w.State() != Pending && p.w.State() != Failed && p.w.State() != Gone {
		r.fail("a write into the temp leaves state %v", p.w.State())
	}
}

// close closes a descriptor of l (the i-th handle) with random facts and
// checks the promises of a close.
func (r *runner) close(l *live, i int) {
	p, rng, hs := r.p, r.rng, r.hs
	facts := FlushFacts{}
	byOpener := rng.Intn(4) != 0
	switch rng.Intn(8) {
	case 0:
		facts.OthersOpen = true
	case 1:
		facts.WriteGoesOn = true
	case 2:
		facts.Signal = 9
	}
	// The scan sees what the opener still holds: a sibling (same
	// opener, same kind) still held is a descriptor it cannot tell
	// from l's.
	sibling := func(o *live) bool {
		return o != l && o.opener == l.opener && o.open.Kind == l.open.Kind
	}
	for _, o := range hs {
		if sibling(o) && o.held && byOpener {
			facts.OthersOpen = true
		}
	}
	dirty, writing := p.w.Dirty(), l.h.Writing()
	otherWriters := 0
	for _, o := range hs {
		// A sibling not held any more leaves with l's last close.
		if o != l && o.h.Writing() && !(sibling(o) && !facts.OthersOpen && !facts.WriteGoesOn && facts.Signal == 0 && byOpener) {
			otherWriters++
		}
	}
	a, k := p.close(l.h, byOpener, facts)
	if byOpener && !facts.OthersOpen && !facts.Unknown {
		l.held = false
		for _, o := range hs {
			if sibling(o) && facts.Signal == 0 && !facts.WriteGoesOn {
				o.held = false
			}
		}
	}
	r.log("close h%d by opener %v %+v -> %v %v, %v", i, byOpener, facts, a, k, p.w.State())
	// Close-to-open: the opener's last close of a writing handle
	// commits, when nothing else of the owner's is being written.
	if byOpener && l.open.Write && (dirty || writing) && facts == clear && otherWriters == 0 && a != FlushCommit {
		r.fail("the opener's last close did not commit")
	}
	// A reader's close commits nothing: it changed nothing.
	if !l.open.Write && a != FlushNone {
		r.fail("a reader's close did %v", a)
	}
	// Nor does any close commit another writer's half-written bytes.
	if a == FlushCommit && otherWriters > 0 {
		r.fail("a close committed while another handle of the owner writes")
	}
	if a == FlushCommit && p.w.Dirty() && p.w.Failure() == 0 {
		r.fail("a commit at close left the write %v", p.w.State())
	}
	r.checkKill(l, a, k, dirty)
}

// checkKill checks the kill rule's promises after a close of l that did
// a (and k); dirty: the write was, before.
func (r *runner) checkKill(l *live, a FlushAction, k KillAction, dirty bool) {
	p := r.p
	// A killed writer's bytes are never dropped.
	if a == FlushKilled && dirty && k == KillNothing && !p.w.Dirty() {
		r.fail("a killed writer's bytes were dropped")
	}
	if a == FlushKilled && writeHandles(r.hs) == 1 && dirty && k == KillNothing {
		r.fail("a killed sole writer's bytes were left")
	}
	if k == KillCommit && !(l.open.Fresh || l.open.Append && !l.open.Truncate) {
		r.fail("a killed writer's commit may tear old content")
	}
}

// release releases the i-th handle and checks the promises of a release.
func (r *runner) release(i int) {
	p := r.p
	l := r.hs[i]
	before := len(p.verdicts)
	wasDirty := p.w.Dirty()
	a := p.release(l.h)
	// An earlier handle's release never commits: another handle
	// may be half way through a rewrite.
	if a == ReleaseCommit && len(r.hs) > 1 {
		r.fail("a release beside %d other handles committed", len(r.hs)-1)
	}
	r.hs = append(r.hs[:i], r.hs[i+1:]...)
	r.log("release h%d -> %v, %v", i, a, p.w.State())
	// A release after a commit never meets a conflict.
	if !wasDirty && len(p.verdicts) != before {
		r.fail("a release with nothing uncommitted reached a verdict %v", p.verdicts[before:])
	}
	if a == ReleaseDropTruncate && l.wrote {
		r.fail("a release dropped bytes written through the handle")
	}
}

// invariants checks what holds after every step.
func (r *runner) invariants() {
	p := r.p
	writers := 0
	for _, o := range r.hs {
		if o.h.Writing() {
			writers++
			if !o.open.Write {
				r.fail("a reader's handle counts as a writer")
			}
		}
	}
	if writers != p.w.Writers() || p.w.Handles() != len(r.hs) {
		r.fail("the machine counts %d writers of %d handles; %d and %d are open", p.w.Writers(), p.w.Handles(), writers, len(r.hs))
	}
	if p.w.Dirty() && !p.w.HasTemp() {
		r.fail("changes without a temp")
	}
}

// injectInvalid picks an event w must reject now, between two steps of
// randomRun (no exchange in progress, no answer owed), and a handle for
// it: one the state table rejects, or one that comes only within an
// exchange or as an answer.
func injectInvalid(rng *rand.Rand, w *Write, hs []*live) (Event, *Handle) {
	evs := []Event{EvTruncated, EvReleased, EvJudge, EvCommitted, EvKilled,
		EvTempWritten, EvChangeDone, EvAppendedInPlace, EvFlush}
	for ev := Event(0); ev < numEvents; ev++ {
		if accepts[ev][w.st] == 0 {
			evs = append(evs, ev)
		}
	}
	h := &Handle{} // none is open: an idle write
	if len(hs) > 0 {
		h = hs[rng.Intn(len(hs))].h
	}
	return evs[rng.Intn(len(evs))], h
}

// writeHandles counts the handles among hs that may change the file.
func writeHandles(hs []*live) int {
	n := 0
	for _, l := range hs {
		if l.open.Write {
			n++
		}
	}
	return n
}
