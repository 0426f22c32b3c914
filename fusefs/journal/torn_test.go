package journal

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/realm-dev/realm/fusefs/journal/keptname"
	"github.com/realm-dev/realm/internal/testseed"
)

// tornCase ends a journal with the record a crash tears: last appends it
// (after two earlier changes) and says whether BACKING holds its change.
type tornCase struct {
	name string
	last func(t *testing.T, b *backing, j *Journal) (made bool)
}

var tornCases = []tornCase{
	{"a rewrite's intent, not committed", func(t *testing.T, b *backing, j *Journal) bool {
		b.write(t, "f", "old")
		b.write(t, ".t", "new")
		st := b.stat(t, ".t")
		_, err := j.Begin(Record{Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f")), After: &ID{st.Dev, st.Ino}}, b.pathFd(t, "f"))
		must(t, err)
		return false
	}},
	{"a rewrite's end, committed", func(t *testing.T, b *backing, j *Journal) bool {
		b.write(t, "f", "old")
		b.write(t, ".t", "new")
		st := b.stat(t, ".t")
		c, err := j.Begin(Record{Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f")), After: &ID{st.Dev, st.Ino}}, b.pathFd(t, "f"))
		must(t, err)
		mv(t, b, ".t", "f")
		must(t, c.Done(nil))
		return true
	}},
	{"an unlink's intent, not moved", func(t *testing.T, b *backing, j *Journal) bool {
		b.write(t, "f", "old")
		rec := Record{Op: OpUnlink, Path: "f", Before: ObjectOf(b.stat(t, "f")), Kept: true}
		_, _, err := j.appendIntent(&rec, false)
		must(t, err)
		return false
	}},
}

var tornSeed = flag.Uint64("journal.seed", 0, "TestTornTail: replay the junk of this seed (0: from the clock)")

// TestTornTail: a crash may leave the last record torn anywhere: cut at
// every byte offset of it, followed by the preallocated zeros or by junk,
// the journal recovers to a consistent state (every change ended, its
// kept version there exactly when it is done, BACKING as the change left
// it) and appends after the cut as before it.
func TestTornTail(t *testing.T) {
	seed := testseed.Seed(t, *tornSeed, "journal.seed")
	for i, tc := range tornCases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case its own stream of the seed, so that the cases
			// run in parallel and still replay from it.
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for k := 0; tornAt(t, tc, k, nil); k++ {
				junk := make([]byte, 1+rng.IntN(64))
				for i := range junk {
					junk[i] = byte(rng.UintN(256))
				}
				tornAt(t, tc, k, junk)
			}
		})
	}
}

// tornAt runs tc, tears its last record after k bytes (then junk), and
// checks the recovery; false once k is past the record's end.
func tornAt(t *testing.T, tc tornCase, k int, junk []byte) bool {
	t.Helper()
	b := newBacking(t)
	opts := Options{SegmentSize: 64 << 10}
	j := b.open(t, opts)
	for _, name := range []string{"x", "y"} {
		b.write(t, name, "v1 of "+name)
		c, err := j.Begin(Record{Op: OpRewrite, Path: name, Before: ObjectOf(b.stat(t, name))}, b.pathFd(t, name))
		must(t, err)
		b.write(t, ".t", "v2 of "+name)
		mv(t, b, ".t", name)
		must(t, c.Done(nil))
	}
	made := tc.last(t, b, j)
	must(t, j.Close())

	seg := b.jpath(logName, segmentName(1))
	data, err := os.ReadFile(seg)
	must(t, err)
	end := bytes.IndexByte(data, 0)
	start := bytes.LastIndexByte(data[:end-1], '\n') + 1
	if k > end-start {
		return false
	}
	torn := k < end-start
	clear(data[start+k : end])
	copy(data[start+k:], junk)
	must(t, os.WriteFile(seg, data, 0o600))

	j = b.open(t, opts)
	rc := j.Recovery()
	if junk == nil && rc.CutBytes != map[bool]int64{true: int64(k), false: 0}[torn] {
		t.Errorf("k=%d: cut %d bytes, want the %d of the torn record", k, rc.CutBytes, k)
	}
	recs, err := j.Records(Filter{})
	must(t, err)
	checkConsistent(t, b, recs, k)
	if got := readFile(t, b, "f"); got != map[bool]string{true: "new", false: "old"}[made] {
		t.Errorf("k=%d: f holds %q", k, got)
	}
	if n := b.stat(t, "f").Nlink; n != 1 {
		t.Errorf("k=%d: f has %d links, want 1 (no kept link to it left)", k, n)
	}

	c, err := j.Begin(Record{Op: OpChmod, Path: "x"}, NoKeep)
	must(t, err)
	must(t, c.Done(nil))
	must(t, j.Close())
	j = b.open(t, opts)
	if rc := j.Recovery(); rc.CutBytes != 0 || rc.Done+rc.Aborted+rc.Outside != 0 || rc.Records != len(recs)+1 {
		t.Errorf("k=%d: reopened after an append: %+v, want %d records and nothing to recover", k, rc, len(recs)+1)
	}
	return true
}

// checkConsistent checks that every change is ended and kept/ holds a
// version exactly for each change done that kept one.
func checkConsistent(t *testing.T, b *backing, recs []Record, k int) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range recs {
		if r.End == "" {
			t.Errorf("k=%d: change %d has no end after recovery", k, r.Seq)
		}
		if r.Kept && r.End == Done {
			want[keptEntry(r.Seq)] = true
		}
	}
	ents, err := os.ReadDir(b.jpath(keptName))
	must(t, err)
	got := map[string]bool{}
	for _, e := range ents {
		seq, _ := keptname.Seq(e.Name())
		name := keptEntry(seq) // a described entry by its seq
		got[name] = true
		if !want[name] {
			t.Errorf("k=%d: kept/%s has no change done that kept it", k, e.Name())
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("k=%d: change %s is done but kept/%s is missing", k, name, name)
		}
	}
}

func readFile(t *testing.T, b *backing, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.path, rel))
	must(t, err)
	return string(data)
}
