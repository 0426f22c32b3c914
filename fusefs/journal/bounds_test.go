package journal

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// grown reports whether Grown was signalled, taking the signal.
func grown(j *Journal) bool {
	select {
	case <-j.Grown():
		return true
	default:
		return false
	}
}

// keptEntries is how many entries kept/ holds.
func keptEntries(t *testing.T, b *backing) int64 {
	t.Helper()
	ents, err := os.ReadDir(b.jpath(keptName))
	must(t, err)
	return int64(len(ents))
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
