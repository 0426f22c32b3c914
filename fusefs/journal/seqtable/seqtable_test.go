package seqtable

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seed = flag.Uint64("seqtable.seed", 0, "the model test's seed (0: from the clock)")

// TestTable: stores, loads and deletes by the table's rules, at chunk
// edges and across runs with holes.
func TestTable(t *testing.T) {
	var tb Table[string]
	if _, ok := tb.Load(7); ok || tb.Delete(7) || tb.Len() != 0 {
		t.Fatal("the zero table holds something")
	}
	for _, seq := range []uint64{300, 255, 256, 5000, 0, 1 << 40} {
		tb.Store(seq, "v")
	}
	tb.Store(300, "w") // a second store replaces, counts once
	if tb.Len() != 6 {
		t.Errorf("Len %d, want 6", tb.Len())
	}
	for _, tc := range []struct {
		seq  uint64
		want string
		ok   bool
	}{{300, "w", true}, {255, "v", true}, {256, "v", true}, {257, "", false}, {0, "v", true}, {1 << 40, "v", true}, {4999, "", false}, {1<<40 + 1, "", false}} {
		if got, ok := tb.Load(tc.seq); got != tc.want || ok != tc.ok {
			t.Errorf("Load(%d) = %q, %v; want %q, %v", tc.seq, got, ok, tc.want, tc.ok)
		}
	}
	for _, seq := range []uint64{0, 255, 256, 300, 1 << 40} {
		if !tb.Delete(seq) {
			t.Errorf("Delete(%d) found nothing", seq)
		}
	}
	if tb.Delete(300) {
		t.Error("Delete(300) twice found it twice")
	}
	if len(tb.chunks) != 1 || tb.Len() != 1 {
		t.Errorf("after the deletes %d chunks hold %d, want the one of 5000", len(tb.chunks), tb.Len())
	}
	tb.Delete(5000)
	if len(tb.chunks) != 0 || tb.Len() != 0 || tb.last != nil {
		t.Errorf("emptied table keeps %d chunks, Len %d", len(tb.chunks), tb.Len())
	}
}

// TestTableModel drives a Table and a map with the same seeded random
// operations (mostly ascending seqs stored, the oldest deleted, as a
// journal does; some anywhere) and compares them after each.
// Replay: go test -run TestTableModel -seqtable.seed=N
func TestTableModel(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", s)
	r := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	var tb Table[uint64]
	model := map[uint64]uint64{}
	next, oldest := uint64(r.IntN(1000)), uint64(0)
	for op := range 200000 {
		var seq uint64
		switch k := r.IntN(10); {
		case k < 5: // the next seq
			next += uint64(1 + r.IntN(3))
			seq = next
			tb.Store(seq, uint64(op))
			model[seq] = uint64(op)
		case k < 8: // prune the oldest
			seq = oldest + uint64(r.IntN(8))
			oldest = seq
			_, in := model[seq]
			delete(model, seq)
			if tb.Delete(seq) != in {
				t.Fatalf("op %d: Delete(%d) disagrees with the model", op, seq)
			}
		case k < 9: // anywhere below next: recovery's order, an undo's
			seq = uint64(r.Int64N(int64(next) + 1))
			tb.Store(seq, uint64(op))
			model[seq] = uint64(op)
		default:
			seq = uint64(r.Int64N(int64(next) + 600))
			tb.Delete(seq)
			delete(model, seq)
		}
		want, in := model[seq]
		if got, ok := tb.Load(seq); ok != in || got != want {
			t.Fatalf("op %d: Load(%d) = %d, %v; the model has %d, %v", op, seq, got, ok, want, in)
		}
		if tb.Len() != len(model) {
			t.Fatalf("op %d: Len %d, the model %d", op, tb.Len(), len(model))
		}
	}
	if len(tb.chunks) > len(model) {
		t.Errorf("%d chunks for %d values: empty chunks kept", len(tb.chunks), len(model))
	}
}

// BenchmarkStoreDelete: a journal's pattern, the next seq stored and the
// one 20,000 before it deleted, beside a map.
func BenchmarkStoreDelete(b *testing.B) {
	b.Run("table", func(b *testing.B) {
		var tb Table[string]
		for i := range uint64(b.N) {
			tb.Store(i+20000, "x")
			tb.Delete(i)
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[uint64]string{}
		for i := range uint64(b.N) {
			m[i+20000] = "x"
			delete(m, i)
		}
	})
}
