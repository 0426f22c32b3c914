package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal/jdir"
)

// removeFiles makes n files and removes them through j, returning their
// seqs.
func removeFiles(t *testing.T, b *backing, j *Journal, n int) []uint64 {
	t.Helper()
	dir := b.dirFd(t, ".")
	var seqs []uint64
	for i := range n {
		name := fmt.Sprintf("f%d", i)
		b.write(t, name, "data")
		seq, err := j.Remove(Record{Owner: "pid:3", Op: OpUnlink, Path: name}, dir, name)
		must(t, err)
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestRemovalsInGroups: described removals go to kept/'s groups, each of
// its own seqs, none to kept/ itself; a prune past a group's seqs removes
// it, and the kept versions of the rest are still found.
func TestRemovalsInGroups(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 16 << 10})
	seqs := removeFiles(t, b, j, 3<<jdir.GroupBits+5)
	ents, err := os.ReadDir(b.jpath(keptName))
	must(t, err)
	var groups []string
	for _, e := range ents {
		num, ok := jdir.GroupNum(e.Name())
		if !ok {
			t.Errorf("kept/%s: a removal's entry outside a group", e.Name())
			continue
		}
		groups = append(groups, e.Name())
		in, err := os.ReadDir(b.jpath(keptName, e.Name()))
		must(t, err)
		for _, k := range in {
			if seq, _, _ := strings.Cut(k.Name(), "~"); seq == "" || jdir.GroupName(parseSeq(t, seq)) != e.Name() || num != parseSeq(t, seq)>>jdir.GroupBits {
				t.Errorf("kept/%s/%s is not of its group", e.Name(), k.Name())
			}
		}
	}
	if len(groups) != 4 {
		t.Fatalf("groups %v, want 4 for %d removals", groups, len(seqs))
	}
	// Prune the segments before the last one: the groups wholly below
	// the pruned mark go.
	for _, s := range seqs {
		fd, err := j.OpenKept(s)
		must(t, err)
		unix.Close(fd)
	}
	if _, err := j.Prune(Bounds{MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	pruned := j.Pruned()
	if pruned < 2<<jdir.GroupBits {
		t.Fatalf("pruned through %d, want past two groups' seqs", pruned)
	}
	for num := uint64(0); num < 4; num++ {
		_, err := os.Stat(b.jpath(keptName, fmt.Sprintf("g%d", num)))
		if below := (num+1)<<jdir.GroupBits-1 <= pruned; below != os.IsNotExist(err) {
			t.Errorf("g%d (pruned %d): %v", num, pruned, err)
		}
	}
	for _, s := range seqs {
		fd, err := j.OpenKept(s)
		if s <= pruned {
			if err == nil {
				unix.Close(fd)
				t.Errorf("kept version of pruned change %d still found", s)
			}
			continue
		}
		must(t, err)
		unix.Close(fd)
	}
	must(t, j.Close())
	j = b.open(t, Options{SegmentSize: 16 << 10})
	if rc := j.Recovery(); rc.KeptRemoved != 0 || rc.Rebuilt != 0 {
		t.Errorf("recovery of a closed journal %+v, want nothing removed or rebuilt", rc)
	}
	must(t, j.Close())
}

// parseSeq is the seq digits say.
func parseSeq(t *testing.T, digits string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscan(digits, &n); err != nil {
		t.Fatalf("%q: %v", digits, err)
	}
	return n
}

// TestDescribedBeforeGroups: a described entry in kept/ itself, as made
// before groups, is found by Open, the journal's OpenKept and a Reader,
// restored by Restore and removed by a prune; an entry in a group not of
// its seq is not the journal's and is left alone.
func TestDescribedBeforeGroups(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	seqs := removeFiles(t, b, j, 2)
	must(t, j.Close())
	for _, seq := range seqs { // back to the layout before groups
		p := b.keptPath(seq)
		must(t, os.Rename(p, b.jpath(keptName, filepath.Base(p))))
	}
	stray := b.jpath(keptName, "g7", "3~pid:3~~~stray")
	must(t, os.Mkdir(filepath.Dir(stray), 0o700))
	must(t, os.WriteFile(stray, []byte("x"), 0o600))

	j = b.open(t, Options{})
	for _, seq := range seqs {
		fd, err := j.OpenKept(seq)
		if err != nil {
			t.Fatalf("OpenKept(%d) of an entry in kept/ itself: %v", seq, err)
		}
		unix.Close(fd)
	}
	r := b.openReader(t)
	fd, err := r.OpenKept(seqs[0])
	must(t, err)
	unix.Close(fd)
	dir := b.dirFd(t, ".")
	if _, err := j.Restore(Record{Owner: "pid:3", Op: OpCreate, Path: "f0"}, seqs[0], NoKeep, dir, "f0"); err != nil {
		t.Fatalf("Restore of an entry in kept/ itself: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(b.path, "f0")); string(got) != "data" {
		t.Errorf("f0 restored holds %q", got)
	}
	if _, err := j.Prune(Bounds{MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(b.jpath(keptName, filepath.Base(b.keptPath(seqs[1])))); !os.IsNotExist(err) {
		t.Errorf("the pruned entry in kept/ itself: %v", err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("an entry not of its group was touched: %v", err)
	}
	must(t, j.Close())
}
