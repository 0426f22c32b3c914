package journal

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal/jdir"
)

// rewrites makes n rewrites of f through the journal, each keeping the
// version before it (a link with no other name once committed).
func rewrites(t *testing.T, b *backing, j *Journal, n int) {
	t.Helper()
	if _, err := os.Lstat(b.path + "/f"); err != nil {
		b.write(t, "f", "v0")
	}
	for i := range n {
		b.write(t, ".t", strings.Repeat("v", 100+i))
		c, err := j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, b.pathFd(t, "f"))
		must(t, err)
		mv(t, b, ".t", "f")
		must(t, c.Done(nil))
	}
}

// usage is the blocks of the segments and the kept objects, as Prune
// counts them.
func usage(t *testing.T, b *backing) int64 {
	t.Helper()
	var total int64
	for _, d := range []string{logName, keptName} {
		ents, err := os.ReadDir(b.jpath(d))
		must(t, err)
		for _, e := range ents {
			var st unix.Stat_t
			must(t, unix.Lstat(b.jpath(d, e.Name()), &st))
			if d == logName || st.Nlink == 1 {
				total += st.Blocks * 512
			}
		}
	}
	return total
}

// checkPruned checks what a prune to seq left: pruned naming it, no kept
// object nor record at or below it, everything above it.
func checkPruned(t *testing.T, b *backing, j *Journal, seq, last uint64) {
	t.Helper()
	if j.Pruned() != seq {
		t.Errorf("Pruned %d, want %d", j.Pruned(), seq)
	}
	if got, err := os.ReadFile(b.jpath(jdir.Pruned)); err != nil || strings.TrimSpace(string(got)) != strconv.FormatUint(seq, 10) {
		t.Errorf("pruned holds %q (%v), want %d", got, err, seq)
	}
	recs, err := j.Records(Filter{})
	must(t, err)
	if uint64(len(recs)) != last-seq || len(recs) > 0 && recs[0].Seq != seq+1 {
		t.Errorf("%d records left, want %d…%d", len(recs), seq+1, last)
	}
	for s := uint64(1); s <= last; s++ {
		_, err := os.Lstat(b.keptPath(s))
		if gone := errors.Is(err, os.ErrNotExist); gone != (s <= seq) {
			t.Errorf("pruned to %d: kept/%d: %v", seq, s, err)
		}
	}
}

// TestPruneBySize: whole segments go, oldest first, with their kept
// objects, until the journal is within its bound; pruned says how far,
// and a reopen agrees.
func TestPruneBySize(t *testing.T) {
	b := newBacking(t)
	opts := Options{SegmentSize: 1024}
	j := b.open(t, opts)
	rewrites(t, b, j, 40)
	total := usage(t, b)
	if st, err := j.Prune(Bounds{MaxBytes: total * 10}); err != nil || st.Segments != 0 || j.Pruned() != 0 {
		t.Fatalf("a prune within the bound: %+v, %v, pruned %d", st, err, j.Pruned())
	}
	segs := len(j.segs)
	st, err := j.Prune(Bounds{MaxBytes: total / 2})
	must(t, err)
	t.Logf("%d bytes in %d segments, pruned to half: %+v", total, segs, st)
	if st.Segments == 0 || st.Segments >= segs || st.Kept != st.Records || st.Records != int(j.Pruned()) {
		t.Errorf("pruned %+v of %d segments to %d", st, segs, j.Pruned())
	}
	if after := usage(t, b); after > total/2 || after != total-st.Bytes {
		t.Errorf("%d bytes after the prune, from %d less %d: want at most %d", after, total, st.Bytes, total/2)
	}
	seq := j.Pruned()
	checkPruned(t, b, j, seq, 40)
	for n := uint64(1); n <= uint64(st.Segments); n++ {
		if _, err := os.Lstat(b.jpath(logName, segmentName(n))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("segment %d is still there: %v", n, err)
		}
	}
	must(t, j.Close())
	j = b.open(t, opts)
	if rc := j.Recovery(); rc.KeptRemoved+rc.SegmentsRemoved != 0 {
		t.Errorf("reopened after a prune: %+v, want nothing to finish", rc)
	}
	checkPruned(t, b, j, seq, 40)
}

// TestPrunePace: a paced Prune calls Pace before each kept object it
// drops, and its urgent says whether the journal, the objects still to
// drop counted, holds more than its bounds and their slack: not within
// them, and yes once changes made during the prune take it past them.
func TestPrunePace(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 1024})
	rewrites(t, b, j, 40)
	total := usage(t, b)
	var urgents []bool
	bounds := Bounds{MaxBytes: total * 4 / 5} // with its slack, more than all there is
	bounds.Pace = func(urgent func() bool) {
		urgents = append(urgents, urgent())
		if len(urgents) == 2 {
			j.addHeld(total*2, 0) // kept meanwhile: past the slack
		}
	}
	st, err := j.Prune(bounds)
	must(t, err)
	if len(urgents) != st.Kept || st.Kept < 3 {
		t.Fatalf("Pace called %d times for %d kept objects dropped, want one each (and at least 3)", len(urgents), st.Kept)
	}
	if urgents[0] || urgents[1] || !urgents[2] {
		t.Errorf("urgent said %v; want false within the bound and its slack, true past them from the third", urgents)
	}
	checkPruned(t, b, j, j.Pruned(), 40)
}

// TestPruneSqueezedUnpaced: where the disk refused an intent (a squeeze),
// Prune does not pace: the room is needed now.
func TestPruneSqueezedUnpaced(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 1024})
	rewrites(t, b, j, 20)
	j.squeezed.Store(true)
	paced := 0
	st, err := j.Prune(Bounds{MaxBytes: 1 << 40, Pace: func(func() bool) { paced++ }})
	must(t, err)
	if st.Kept == 0 || paced != 0 {
		t.Errorf("a squeezed Prune dropped %d kept objects and paced %d of them, want some and none", st.Kept, paced)
	}
}

// TestWeighSealedOnce: a segment no longer appended to keeps the weight
// of its first weighing (its records do not change), so that a Prune does
// not lstat the whole journal; the first weighing renewAfter the last
// renewing one renews them all, for a kept object the host changed
// behind the journal.
func TestWeighSealedOnce(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 1024})
	rewrites(t, b, j, 20)
	weights := func() map[uint64]int64 {
		segs, _, err := j.weigh()
		must(t, err)
		w := map[uint64]int64{}
		for _, s := range segs {
			w[s.num] = s.bytes
		}
		return w
	}
	first := weights()
	if len(first) < 3 {
		t.Fatalf("%d segments, want several", len(first))
	}
	// kept/1, in the first segment, grows behind the journal.
	must(t, os.WriteFile(b.keptPath(1), []byte(strings.Repeat("x", 1<<20)), 0o600))
	for i := range 20 {
		if w := weights(); w[1] != first[1] {
			t.Fatalf("weighing %d: the sealed first segment weighs %d, was %d: weighed again", i, w[1], first[1])
		}
	}
	j.renewed = j.renewed.Add(-renewAfter) // renewAfter passes
	if w := weights(); w[1] < 1<<20 {
		t.Fatalf("the weighing %v on renews all: the first segment weighs %d (was %d), want its kept object's 1 MiB in it", renewAfter, w[1], first[1])
	}
	if w := weights(); w[1] < 1<<20 {
		t.Fatalf("the weighing after the renewing one: the first segment weighs %d, want the renewed weight", w[1])
	}
}

// TestPruneByAge: segments whose newest record is older than the bound
// go; one that holds a newer record stays whole. The segment appended to
// goes too once all of it is old, and seqs go on after it.
func TestPruneByAge(t *testing.T) {
	b := newBacking(t)
	clk := newClock()
	opts := Options{SegmentSize: 1024, Now: clk.Now}
	j := b.open(t, opts)
	rewrites(t, b, j, 20)
	clk.advance(8 * 24 * time.Hour)
	rewrites(t, b, j, 20)
	st, err := j.Prune(Bounds{Keep: 7 * 24 * time.Hour})
	must(t, err)
	seq := j.Pruned()
	if st.Segments == 0 || seq > 20 || seq < 10 {
		t.Errorf("pruned %+v to %d, want the old segments, not past seq 20", st, seq)
	}
	checkPruned(t, b, j, seq, 40)

	clk.advance(8 * 24 * time.Hour)
	if _, err := j.Prune(Bounds{Keep: 7 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	checkPruned(t, b, j, 40, 40)
	c, err := j.Begin(Record{Op: OpCreate, Path: "n"}, NoKeep)
	must(t, err)
	if c.Seq() != 41 {
		t.Errorf("after all was pruned, seq %d, want 41", c.Seq())
	}
	must(t, c.Done(nil))
	must(t, j.Close())
	j = b.open(t, opts)
	c, err = j.Begin(Record{Op: OpCreate, Path: "n"}, NoKeep)
	must(t, err)
	if c.Seq() != 42 {
		t.Errorf("reopened, seq %d, want 42", c.Seq())
	}
}

// TestPruneLeavesEmptyCurrent: a bound below one segment drops every
// segment with records, rotating the one appended to, but not the new one
// that holds none (dropping it would only rotate again, for ever).
func TestPruneLeavesEmptyCurrent(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	rewrites(t, b, j, 3)
	st, err := j.Prune(Bounds{MaxBytes: 1})
	must(t, err)
	if st.Segments != 1 || st.Records != 3 {
		t.Errorf("first prune dropped %+v, want the 1 segment and its 3 records", st)
	}
	st, err = j.Prune(Bounds{MaxBytes: 1})
	must(t, err)
	if st.Segments != 0 {
		t.Errorf("second prune dropped %+v, want nothing (the segment appended to holds no record)", st)
	}
	select {
	case <-j.Grown():
		t.Errorf("a prune's rotation signalled Grown")
	default:
	}
}

// TestGrownAtRotation: a segment filled up and rotated signals Grown.
func TestGrownAtRotation(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 4096})
	for len(j.segs) < 2 {
		rewrites(t, b, j, 1)
		select {
		case <-j.Grown():
			if len(j.segs) < 2 {
				t.Fatalf("Grown signalled with %d segment(s)", len(j.segs))
			}
			return
		default:
		}
	}
	t.Fatal("a rotation did not signal Grown")
}

// grown reports whether Grown was signalled, taking the signal.
func grown(j *Journal) bool {
	select {
	case <-j.Grown():
		return true
	default:
		return false
	}
}

// keptEntries is how many kept objects kept/ and its groups hold.
func keptEntries(t *testing.T, b *backing) int64 {
	t.Helper()
	ents, err := os.ReadDir(b.jpath(keptName))
	must(t, err)
	n := int64(0)
	for _, e := range ents {
		if _, ok := jdir.GroupNum(e.Name()); !ok {
			n++
			continue
		}
		in, err := os.ReadDir(b.jpath(keptName, e.Name()))
		must(t, err)
		n += int64(len(in))
	}
	return n
}

// removeEmpty makes and removes (through the journal) an empty file.
func removeEmpty(t *testing.T, b *backing, j *Journal, name string) {
	t.Helper()
	b.write(t, name, "")
	dir := b.dirFd(t, ".")
	if _, err := j.Remove(Record{Owner: "session:1", Op: OpUnlink, Path: name}, dir, name); err != nil {
		t.Fatal(err)
	}
}

// TestGrownPastFilesBound: empty files removed weigh no blocks, but each
// is a file the journal holds: Grown is signalled by the change that
// passes the files bound (not a segment or 4096 changes later), and the
// prune then leaves no more files than the bound.
func TestGrownPastFilesBound(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 2048})
	bounds := Bounds{MaxBytes: 1 << 40, MaxFiles: 20}
	if _, err := j.Prune(bounds); err != nil {
		t.Fatal(err)
	}
	grown(j)
	for i := 0; ; i++ {
		rotations := len(j.segs)
		removeEmpty(t, b, j, "e"+strconv.Itoa(i))
		_, files := j.Held()
		signalled := grown(j)
		if len(j.segs) != rotations {
			continue // a rotation signals too
		}
		if signalled != (files > bounds.MaxFiles) {
			t.Fatalf("change %d: %d files held (bound %d): Grown signalled %v", i, files, bounds.MaxFiles, signalled)
		}
		if signalled {
			break
		}
	}
	st, err := j.Prune(bounds)
	must(t, err)
	_, files := j.Held()
	segs := int64(len(j.segs))
	if st.Kept == 0 || files > bounds.MaxFiles || keptEntries(t, b)+segs != files {
		t.Errorf("pruned %+v: %d files held, %d in kept/ and %d segments, want them to agree and at most %d",
			st, files, keptEntries(t, b), segs, bounds.MaxFiles)
	}
}

// TestGrownPastBytesBound: a kept version that takes the journal past its
// size signals Grown at once, with a segment far from full.
func TestGrownPastBytesBound(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	rewrites(t, b, j, 1) // the segment, made
	held, _ := j.Held()
	bounds := Bounds{MaxBytes: held + 256<<10}
	if _, err := j.Prune(bounds); err != nil {
		t.Fatal(err)
	}
	grown(j)
	b.write(t, "f", strings.Repeat("x", 128<<10))
	rewrites(t, b, j, 1)
	if bytes, _ := j.Held(); grown(j) {
		t.Fatalf("signalled within the bound (%d bytes held, bound %d)", bytes, bounds.MaxBytes)
	}
	b.write(t, "f", strings.Repeat("y", 256<<10))
	rewrites(t, b, j, 1)
	if bytes, _ := j.Held(); !grown(j) || bytes <= bounds.MaxBytes {
		t.Fatalf("%d bytes held (bound %d): Grown not signalled", bytes, bounds.MaxBytes)
	}
	if len(j.segs) != 1 {
		t.Fatalf("%d segments: the test wants the first one not full", len(j.segs))
	}
	st, err := j.Prune(bounds)
	must(t, err)
	if bytes, _ := j.Held(); st.Segments != 1 || bytes > bounds.MaxBytes || usage(t, b) != bytes {
		t.Errorf("pruned %+v: %d bytes held, %d on disk, bound %d", st, bytes, usage(t, b), bounds.MaxBytes)
	}
}

// TestHeldAtOpen: what the journal holds is counted from what is on disk
// when it opens, as Prune weighs it, and kept up as it keeps, aborts and
// restores.
func TestHeldAtOpen(t *testing.T) {
	b := newBacking(t)
	opts := Options{SegmentSize: 1024}
	j := b.open(t, opts)
	rewrites(t, b, j, 10)
	for i := range 5 {
		removeEmpty(t, b, j, "e"+strconv.Itoa(i))
	}
	c, err := j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, b.pathFd(t, "f"))
	must(t, err)
	must(t, c.Abort())
	check := func(when string) {
		t.Helper()
		bytes, files := j.Held()
		if segs := int64(len(j.segs)); files != keptEntries(t, b)+segs {
			t.Errorf("%s: %d files held, want %d kept and %d segments", when, files, keptEntries(t, b), segs)
		}
		if bytes != usage(t, b) {
			t.Errorf("%s: %d bytes held, %d on disk", when, bytes, usage(t, b))
		}
	}
	check("kept up")
	must(t, j.Close())
	j = b.open(t, opts)
	check("at Open")
}

// TestPruneWithinBoundsSkipsWeighing: a Prune whose count is within its
// bounds weighs nothing, not even the segment appended to (the count
// stands, even where the host grew a kept object behind the journal),
// until the weighing that renews every weight, which finds the growth;
// one past a bound weighs and drops at once.
func TestPruneWithinBoundsSkipsWeighing(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{}) // one segment, appended to: weighed at every weighing
	rewrites(t, b, j, 20)
	roomy := Bounds{MaxBytes: 1 << 40, MaxFiles: 1 << 20}
	_, err := j.Prune(roomy)
	must(t, err)
	counted, _ := j.Held()
	must(t, os.WriteFile(b.keptPath(1), []byte(strings.Repeat("x", 1<<20)), 0o600))
	for i := range 20 {
		_, err := j.Prune(roomy)
		must(t, err)
		if held, _ := j.Held(); held != counted {
			t.Fatalf("prune %d within bounds: held %d, was %d: it weighed", i, held, counted)
		}
	}
	j.renewed = j.renewed.Add(-renewAfter) // renewAfter passes
	_, err = j.Prune(roomy)
	must(t, err)
	if held, _ := j.Held(); held < 1<<20 {
		t.Fatalf("the renewing prune: held %d (counted %d before), want the kept object's 1 MiB in it", held, counted)
	}
	st, err := j.Prune(Bounds{MaxBytes: 1})
	must(t, err)
	if st.Segments == 0 {
		t.Errorf("a prune past its bound dropped nothing: %+v", st)
	}
}

// TestTallyIsTheWeighing: a segment made by this Open is weighed by its
// tally (countKept), not by an lstat of each kept object, and the tally
// is what those lstats find: removals (their intents held, and counted
// once written), a version kept by link whose name then goes, a link
// aborted, and a removed file restored.
func TestTallyIsTheWeighing(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 1024})
	dir := b.dirFd(t, ".")
	seqs := map[string]uint64{}
	for i := range 30 {
		name := "f" + strconv.Itoa(i)
		b.write(t, name, strings.Repeat("x", i*5000))
		seq, err := j.Remove(Record{Owner: "session:1", Op: OpUnlink, Path: name}, dir, name)
		must(t, err)
		seqs[name] = seq
		j.mu.Lock()
		_, untallied := j.untallied[seq]
		j.mu.Unlock()
		if i == 0 && j.describes && !untallied {
			t.Error("a removal whose intent is held is not counted for the segment that notes it")
		}
		if i%7 == 3 {
			b.write(t, "g", strings.Repeat("y", 70000))
			c, err := j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "g"}, b.pathFd(t, "g"))
			must(t, err)
			must(t, c.Done(nil))
			must(t, os.Remove(b.path+"/g")) // the commit's rename over it
			b.write(t, "h", strings.Repeat("z", 9000))
			c, err = j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "h"}, b.pathFd(t, "h"))
			must(t, err)
			must(t, c.Abort())
		}
		if i == 12 {
			_, err := j.Restore(Record{Owner: "session:1", Op: OpCreate, Path: "f5"}, seqs["f5"], NoKeep, dir, "f5")
			must(t, err)
		}
	}
	if _, _, err := j.heldWritten(); err != nil {
		t.Fatal(err)
	}
	segs, _, err := j.weigh()
	must(t, err)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for _, s := range segs {
		if s.tally == nil {
			t.Fatalf("segment %d, made by this Open and never weighed, has no tally", s.num)
		}
		tb, tf, err := j.weighOne(s)
		must(t, err)
		s.tally = nil
		lb, lf, err := j.weighOne(s)
		must(t, err)
		if tb != lb || tf != lf {
			t.Errorf("segment %d: tally %d bytes, %d files; its lstats %d bytes, %d files", s.num, tb, tf, lb, lf)
		}
	}
}
