package keptlinks

import (
	"slices"
	"sync"
	"testing"
)

// seqs is what Each gives for k.
func seqs(t *Table, k Key) []uint64 {
	var got []uint64
	t.Each(k, func(seq uint64) bool { got = append(got, seq); return true })
	slices.Sort(got)
	return got
}

func TestTable(t *testing.T) {
	a, b := Key{1, 10}, Key{1, 11}
	type step struct {
		add  bool
		k    Key
		seq  uint64
		want []uint64 // a's seqs after it
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"one link", []step{{true, a, 5, []uint64{5}}, {false, a, 5, nil}}},
		{"first removed of three", []step{{true, a, 5, []uint64{5}}, {true, a, 7, []uint64{5, 7}}, {true, a, 9, []uint64{5, 7, 9}}, {false, a, 5, []uint64{7, 9}}, {false, a, 9, []uint64{7}}, {false, a, 7, nil}}},
		{"another key", []step{{true, a, 5, []uint64{5}}, {true, b, 6, []uint64{5}}, {false, b, 6, []uint64{5}}}},
		{"a seq not noted", []step{{true, a, 5, []uint64{5}}, {false, a, 6, []uint64{5}}, {false, b, 5, []uint64{5}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tab Table
			for i, s := range tc.steps {
				if s.add {
					tab.Add(s.k, s.seq)
				} else {
					tab.Remove(s.k, s.seq)
				}
				if got := seqs(&tab, a); !slices.Equal(got, s.want) {
					t.Fatalf("step %d: a's seqs %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// TestEachCounts: Each counts the seqs f says true of.
func TestEachCounts(t *testing.T) {
	var tab Table
	k := Key{2, 3}
	for _, s := range []uint64{1, 2, 3, 4} {
		tab.Add(k, s)
	}
	if n := tab.Each(k, func(seq uint64) bool { return seq%2 == 0 }); n != 2 {
		t.Errorf("Each counted %d, want 2", n)
	}
	if n := tab.Each(Key{9, 9}, func(uint64) bool { return true }); n != 0 {
		t.Errorf("Each of a key with no links counted %d", n)
	}
	if tab.Len() != 1 {
		t.Errorf("Len %d, want 1", tab.Len())
	}
}

// TestConcurrentReaders: readers range over a key's seqs while one writer
// (as the journal's, under its lock) adds and removes them; run with -race.
func TestConcurrentReaders(t *testing.T) {
	var tab Table
	k := Key{1, 1}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tab.Each(k, func(seq uint64) bool { return seq > 0 })
			}
		})
	}
	for i := uint64(1); i <= 2000; i++ {
		tab.Add(k, i)
		if i%3 == 0 {
			tab.Remove(k, i-1)
		}
	}
	close(stop)
	wg.Wait()
	if n := len(seqs(&tab, k)); n != 2000-666 {
		t.Errorf("%d seqs left, want %d", n, 2000-666)
	}
}

// TestFold: Adds past the pending list's bound, and some left in it, read
// as they were added: each key's seqs in order, its first one first (the
// value a removal of it compares), with a Remove between them.
func TestFold(t *testing.T) {
	var tab Table
	const keys = 97
	n := 3*foldAt + 11
	want := map[Key][]uint64{}
	for i := range n {
		k := Key{Dev: uint64(i % 2), Ino: uint64(i % keys)}
		tab.Add(k, uint64(i+1))
		want[k] = append(want[k], uint64(i+1))
		if i == foldAt+5 { // one removed from the shards, one from the list
			tab.Remove(Key{0, 0}, 1)
			tab.Remove(k, uint64(i+1))
			want[Key{0, 0}] = want[Key{0, 0}][1:]
			want[k] = want[k][:len(want[k])-1]
		}
	}
	if tab.Len() != len(want) {
		t.Fatalf("Len %d, want %d", tab.Len(), len(want))
	}
	for k, w := range want {
		var got []uint64
		tab.Each(k, func(seq uint64) bool { got = append(got, seq); return true })
		if !slices.Equal(got, w) {
			t.Fatalf("%v: seqs %v, want %v (in the order added)", k, got, w)
		}
	}
}
