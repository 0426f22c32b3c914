package writeengine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
)

// TestEngineRandomized drives the real engine (no copy of the adapter's
// calling sequence: the calls fusefs's handles make, one kernel event
// each) over a temp directory with random events from two owners: opens
// in every write mode, writes at offsets and appends, truncations,
// fsyncs, closes, SIGKILLed writers, changes behind the mount and renames
// through it. After every event it checks what the engine promises of the
// backing directory:
//
//   - a commit puts exactly the owner's bytes in place (what its temp,
//     or the file it appends to, held just before), or on a conflict
//     (EBUSY) leaves the file as it was and keeps those bytes beside it;
//   - a close that commits nothing, a failed open and a write change
//     nothing another owner sees;
//   - no event the protocol rejects (newEngineDir's cleanup), and once
//     every handle is gone no temp, no lock and no charged descriptor.
//
// Each run is seeded and prints its seed; -writeengine.seed=N replays one.
func TestEngineRandomized(t *testing.T) {
	seeds := []uint64{*randomSeed}
	if *randomSeed == 0 {
		base := uint64(time.Now().UnixNano())
		seeds = seeds[:0]
		for i := range *randomRuns {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		r := &randomRun{t: t, d: newEngineDir(t, "init|"), rng: rand.New(rand.NewPCG(seed, 0x656e67)), name: "f"}
		r.committed, r.views = "init|", map[locks.Owner]string{}
		for step := range 120 {
			r.step(step)
			if t.Failed() {
				t.Fatalf("seed %d (replay: go test -run TestEngineRandomized -writeengine.seed=%d ./fusefs/writeengine/), step %d; trace:\n%s",
					seed, seed, step, strings.Join(r.trace, "\n"))
			}
		}
		r.closeAll()
		r.checkQuiet()
		if t.Failed() {
			t.Fatalf("seed %d (replay: -writeengine.seed=%d); trace:\n%s", seed, seed, strings.Join(r.trace, "\n"))
		}
	}
}

var (
	randomSeed = flag.Uint64("writeengine.seed", 0, "TestEngineRandomized: replay the run of this seed")
	randomRuns = flag.Int("writeengine.runs", 40, "TestEngineRandomized: runs of 120 events")
)

// randomHandle is one open of the file by an owner.
type randomHandle struct {
	f       *File[*fakeNode]
	w       *Write[*fakeNode] // f's
	owner   locks.Owner
	appends bool
}

// randomRun is one seeded run: the engine, the handles open, the file's
// name now and its committed content as the test knows it.
type randomRun struct {
	t         *testing.T
	d         *engineDir
	rng       *rand.Rand
	hs        []*randomHandle
	name      string
	committed string
	// views are the owners' uncommitted bytes, as the test computes them
	// from the events (no entry: the owner reads the file as committed).
	views map[locks.Owner]string
	trace []string
}

// modelView is what the owner of x should read: its uncommitted bytes,
// else the file.
func (r *randomRun) modelView(x *randomHandle) string {
	if v, ok := r.views[x.owner]; ok {
		return v
	}
	return r.committed
}

// checkView checks the engine's view of x's owner against the test's.
func (r *randomRun) checkView(x *randomHandle, when string) string {
	got := r.view(x)
	if want := r.modelView(x); got != want {
		r.t.Errorf("%s: owner %s reads %q through the engine; its events make %q", when, x.owner, got, want)
	}
	return got
}

// held reports whether owner has a handle open.
func (r *randomRun) held(owner locks.Owner) bool {
	return slices.ContainsFunc(r.hs, func(x *randomHandle) bool { return x.owner == owner })
}

func (r *randomRun) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

// step draws one event and checks what it left.
func (r *randomRun) step(step int) {
	switch n := r.rng.IntN(100); {
	case n < 22 || len(r.hs) == 0:
		r.open()
	case n < 50:
		r.write(step)
	case n < 56:
		r.truncate()
	case n < 64:
		r.fsync()
	case n < 84:
		r.close([]closeKind{closeLast, closeLast, closeLast, closeStranger, closeOthers, closeUnknown, closeInFlight}[r.rng.IntN(7)])
	case n < 88:
		r.close(closeKilled)
	case n < 94:
		r.outside(step)
	default:
		r.rename()
	}
	if got := r.read(r.name); got != r.committed {
		r.t.Errorf("%s holds %q; the engine's commits left %q", r.name, got, r.committed)
	}
}

func (r *randomRun) read(name string) string {
	b, err := os.ReadFile(filepath.Join(r.d.path, name))
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	return string(b)
}

// open opens the file for owner a or b as a write open does: verified
// base, the lock in the open's mode, the owner's write joined or begun.
func (r *randomRun) open() {
	owner := locks.Owner([]string{"a", "b"}[r.rng.IntN(2)])
	flags := []int{unix.O_TRUNC, unix.O_RDWR, unix.O_APPEND}[r.rng.IntN(3)]
	f, err := r.d.openAs(owner, r.name, flags, uint32(len(r.hs)+1))
	if err != nil {
		r.logf("%s open %#o: %v", owner, flags, err)
		return
	}
	r.hs = append(r.hs, &randomHandle{f: f, w: f.Pending(), owner: owner, appends: flags == unix.O_APPEND})
	if flags == unix.O_TRUNC {
		r.views[owner] = ""
	}
	r.logf("%s open #%d %#o", owner, len(r.hs)-1, flags)
}

// pick is a handle of the run, by index.
func (r *randomRun) pick() (int, *randomHandle) {
	i := r.rng.IntN(len(r.hs))
	return i, r.hs[i]
}

// view is what the owner of x reads of the file now.
func (r *randomRun) view(x *randomHandle) string {
	st := unix.Stat_t{}
	if err := unix.Fstat(x.w.Cur(), &st); err != nil {
		r.t.Fatal(err)
	}
	b := make([]byte, st.Size)
	n, err := unix.Pread(x.w.Cur(), b, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b[:n])
}

func (r *randomRun) write(step int) {
	i, x := r.pick()
	data := fmt.Sprintf("%s%d|", x.owner, step)
	x.w.Entry().Lock()
	view := r.checkView(x, "before a write")
	inPlace := x.appends && !x.w.Uncommitted()
	x.w.Entry().Unlock()
	off := r.rng.IntN(len(view) + 1)
	n, errno := x.f.Write(context.Background(), 1, 0, false, []byte(data), int64(off))
	if errno != 0 || n != len(data) {
		r.t.Fatalf("write #%d: %d, %v", i, n, errno)
	}
	x.w.Entry().Lock()
	stillInPlace := !x.w.Uncommitted()
	x.w.Entry().Unlock()
	switch {
	case inPlace && stillInPlace:
		r.committed += data // an append in place is in the file at once
	case x.appends:
		r.views[x.owner] = view + data
	default:
		b := []byte(view)
		for len(b) < off+len(data) {
			b = append(b, 0)
		}
		copy(b[off:], data)
		r.views[x.owner] = string(b)
	}
	r.logf("%s write #%d %q at %d (appends %v)", x.owner, i, data, off, x.appends)
}

func (r *randomRun) truncate() {
	i, x := r.pick()
	x.w.Entry().Lock()
	view := r.checkView(x, "before an ftruncate")
	x.w.Entry().Unlock()
	size := len(view) / 2
	if errno := x.f.Truncate(context.Background(), uint64(size)); errno != 0 {
		r.t.Fatalf("ftruncate #%d: %v", i, errno)
	}
	r.views[x.owner] = view[:size]
	r.logf("%s ftruncate #%d %d", x.owner, i, size)
}

// fsync commits the owner's bytes durably.
func (r *randomRun) fsync() {
	i, x := r.pick()
	x.w.Entry().Lock()
	want := r.checkView(x, "before an fsync")
	x.w.Entry().Unlock()
	before := r.copies()
	errno := x.f.Commit(context.Background(), true)
	r.logf("%s fsync #%d: %v", x.owner, i, errno)
	r.committedBy(x.owner, want, errno, before)
}

// How a close goes, as the test draws it: what the closing thread is
// found to hold (fakeProcs), or another thread's write(2) in flight.
type closeKind int

const (
	closeLast     closeKind = iota // the opener's last descriptor
	closeKilled                    // its opener dies of SIGKILL
	closeStranger                  // another process's (an inherited descriptor)
	closeOthers                    // the opener holds another descriptor of the open
	closeUnknown                   // /proc could not tell
	closeInFlight                  // a write(2) through the open goes on
)

var closeKinds = []string{"last", "killed", "by another process", "beside another descriptor", "unknown", "beside a write in flight"}

// close closes a handle (FLUSH by thread 1, with what how draws, then
// RELEASE). Only the opener's last close, or its death, commits at the
// FLUSH; the owner's last release commits what is left.
func (r *randomRun) close(how closeKind) {
	i, x := r.pick()
	ctx := context.Background()
	x.w.Entry().Lock()
	want := r.checkView(x, "before a close")
	x.w.Entry().Unlock()
	before := r.copies()
	r.d.procs.set(func(p *procFacts) {
		*p = procFacts{stranger: how == closeStranger}
		switch how {
		case closeKilled:
			p.signal = int(unix.SIGKILL)
		case closeOthers:
			p.others = 1
		case closeUnknown:
			p.err = errors.New("no /proc")
		}
	})
	if how == closeInFlight {
		x.f.writes.Add(1)
	}
	errno := x.f.Flush(ctx, 1)
	x.f.writes.Store(0)
	r.d.procs.set(func(p *procFacts) { *p = procFacts{} })
	if how != closeLast && how != closeKilled && r.read(r.name) != r.committed {
		r.t.Errorf("a close %s committed", closeKinds[how])
	}
	x.f.Release(ctx)
	x.w.Entry().Lock()
	left := x.w.Uncommitted()
	x.w.Entry().Unlock()
	r.hs = slices.Delete(r.hs, i, i+1)
	r.logf("%s close #%d (%s): %v", x.owner, i, closeKinds[how], errno)
	if how == closeKilled {
		r.killedBy(x.owner, want, before, left)
		return
	}
	if _, ok := r.views[x.owner]; ok && !r.held(x.owner) || !left {
		// The owner's last release commits what is left; a close that
		// committed left nothing.
		r.committedBy(x.owner, want, errno, before)
	}
}

// committedBy checks a commit point of owner's bytes (want): they are the
// file after it, or on a conflict (EBUSY at a close or fsync; a release
// hears no error) a copy beside it and the file as it was.
func (r *randomRun) committedBy(owner locks.Owner, want string, errno syscall.Errno, before []string) {
	if _, ok := r.views[owner]; !ok {
		return // nothing uncommitted: nothing to commit
	}
	delete(r.views, owner)
	now := r.read(r.name)
	switch {
	case errno != 0 && errno != syscall.EBUSY:
		r.t.Errorf("commit: %v", errno)
	case now == want:
		r.committed = now
	case now != r.committed:
		r.t.Errorf("a commit put %q in place; the owner's bytes were %q", now, want)
	case !slices.Contains(r.newCopies(before), want):
		r.t.Errorf("a commit kept the file and no conflict copy of %q (errno %v)", want, errno)
	}
}

// killedBy checks a killed writer's bytes (want): committed where that
// tears nothing, kept as a recovery copy otherwise, or left to the
// owner's other handles.
func (r *randomRun) killedBy(owner locks.Owner, want string, before []string, left bool) {
	if _, ok := r.views[owner]; !ok || left && r.held(owner) {
		return // nothing to commit, or left to the owner's other handles
	}
	now := r.read(r.name)
	switch {
	case now == want:
		r.committed = now
		delete(r.views, owner)
	case now != r.committed:
		r.t.Errorf("a killed writer's commit put %q in place; its bytes were %q", now, want)
	case slices.Contains(r.newCopies(before), want):
		delete(r.views, owner)
	case !r.held(owner):
		r.t.Errorf("a killed writer's bytes %q went nowhere (beside the file: %q; logs %q)", want, r.d.others(r.t), r.d.host.logs)
	}
}

// outside changes the file behind the engine, as a host process would.
func (r *randomRun) outside(step int) {
	data := fmt.Sprintf("host%d|", step)
	if err := os.WriteFile(filepath.Join(r.d.path, r.name), []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.committed = data
	r.logf("host writes %q", data)
}

// rename moves the file through the mount, as fusefs's Rename does.
func (r *randomRun) rename() {
	to := map[string]string{"f": "g", "g": "f"}[r.name]
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(r.d.path, r.name), &st); err != nil {
		r.t.Fatal(err)
	}
	end := r.d.g.BeginMoves([]locks.Key{locks.KeyOf(&st)})
	if err := os.Rename(filepath.Join(r.d.path, r.name), filepath.Join(r.d.path, to)); err != nil {
		r.t.Fatal(err)
	}
	r.d.g.Renamed(locks.KeyOf(&st), &fakeNode{"."}, r.d.dfd, to)
	end()
	r.logf("rename %s %s", r.name, to)
	r.name = to
}

// copies lists the conflict and recovery copies beside the file.
func (r *randomRun) copies() []string {
	var out []string
	for _, n := range r.d.others(r.t) {
		if strings.Contains(n, ".realm-conflict-") || strings.Contains(n, ".realm-recovered-") {
			out = append(out, n)
		}
	}
	return out
}

// newCopies is the content of each copy beside the file that is not one
// of before.
func (r *randomRun) newCopies(before []string) []string {
	var out []string
	for _, n := range r.copies() {
		if !slices.Contains(before, n) {
			out = append(out, r.read(n))
		}
	}
	return out
}

// closeAll closes every handle left, in order.
func (r *randomRun) closeAll() {
	for _, x := range r.hs {
		x.f.Flush(context.Background(), 1)
		x.f.Release(context.Background())
	}
	r.hs = nil
}

// checkQuiet checks that nothing is left once every handle is gone.
func (r *randomRun) checkQuiet() {
	for _, n := range r.d.others(r.t) {
		if strings.HasPrefix(n, TempPrefix) {
			r.t.Errorf("a temp is left: %s", n)
		}
	}
	if n := r.d.g.table.Len(); n != 0 {
		r.t.Errorf("the lock table holds %d entries", n)
	}
	r.d.host.mu.Lock()
	defer r.d.host.mu.Unlock()
	if r.d.host.charged != 0 {
		r.t.Errorf("%d writes still charged", r.d.host.charged)
	}
}
