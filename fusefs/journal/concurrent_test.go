package journal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentBeginEnd: Begins and ends from many goroutines, with
// segments rotating and readers and prunes meanwhile, give each change
// its own seq, strictly increasing in the log and for each goroutine, and
// every change its end.
func TestConcurrentBeginEnd(t *testing.T) {
	const goroutines, each = 8, 100
	for _, tc := range []struct {
		name             string
		durable, ordered bool  // ordered: intents carried (package carry)
		prune            int64 // the bound a concurrent Prune applies (0: none runs)
	}{
		{"buffered", false, false, 0},
		{"durable", true, false, 0},
		{"durable, pruned meanwhile", true, false, 16 << 10},
		{"carried, pruned meanwhile", true, true, 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			j := b.open(t, Options{Durable: tc.durable, Ordered: tc.ordered, SegmentSize: 2048})
			if tc.ordered && j.carry == nil {
				t.Fatal("no carry with Options.Ordered")
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var readers sync.WaitGroup
			readers.Add(1)
			go func() { // reads and prunes while the changes go on
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					recs, err := j.Records(Filter{})
					if err != nil {
						t.Error(err)
						return
					}
					for i := 1; i < len(recs); i++ {
						if recs[i].Seq <= recs[i-1].Seq {
							t.Errorf("a concurrent read: seq %d after %d", recs[i].Seq, recs[i-1].Seq)
							return
						}
					}
					if tc.prune > 0 {
						if _, err := j.Prune(Bounds{MaxBytes: tc.prune}); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var last uint64
					for i := range each {
						c, err := j.Begin(Record{Owner: fmt.Sprintf("pid:%d", g), Op: OpCreate, Path: fmt.Sprintf("g%d/%d", g, i)}, NoKeep)
						if err != nil {
							t.Error(err)
							return
						}
						if c.Seq() <= last {
							t.Errorf("goroutine %d: seq %d after %d", g, c.Seq(), last)
						}
						last = c.Seq()
						end := c.Done
						if i%7 == 0 {
							end = func(*ID) error { return c.Abort() }
						}
						if err := end(nil); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			readers.Wait()
			recs, err := j.Records(Filter{})
			must(t, err)
			first := j.Pruned() + 1
			t.Logf("%d changes, pruned to %d", goroutines*each, j.Pruned())
			if n := uint64(len(recs)); n != goroutines*each-j.Pruned() {
				t.Fatalf("%d records from %d, want %d…%d", n, first, first, goroutines*each)
			}
			for i, r := range recs {
				if r.Seq != first+uint64(i) {
					t.Fatalf("record %d has seq %d, want %d", i, r.Seq, first+uint64(i))
				}
				if r.End == "" {
					t.Errorf("change %d has no end", r.Seq)
				}
			}
		})
	}
}

// BenchmarkBeginEnd: one change's records (Begin, then Done), from one
// goroutine and from eight at once; with Durable each Begin waits for its
// intent's fdatasync, which the eight share (group commit). keep=link
// keeps a file by link too (its fsync of kept/ shared as well), and
// aborts, which removes the link (a file has at most 65000).
func BenchmarkBeginEnd(b *testing.B) {
	for _, mode := range []struct {
		durable, link bool
	}{{false, false}, {true, false}, {true, true}} {
		for _, goroutines := range []int{1, 8} {
			b.Run(fmt.Sprintf("durable=%v/keep=%v/goroutines=%d", mode.durable, map[bool]string{true: "link", false: "none"}[mode.link], goroutines), func(b *testing.B) {
				bk := newBacking(b)
				j, err := Open(bk.root, DefaultDir, Options{Durable: mode.durable})
				must(b, err)
				defer j.Close()
				rec := Record{Owner: "session:7", Op: OpCreate, Path: "src/some/file.go"}
				keep := NoKeep
				if mode.link {
					bk.write(b, "f", "data")
					keep = bk.pathFd(b, "f")
				}
				var n atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n.Add(1) <= int64(b.N) {
							c, err := j.Begin(rec, keep)
							if err != nil {
								b.Error(err)
								return
							}
							end := c.Done
							if mode.link {
								end = func(*ID) error { return c.Abort() }
							}
							if err := end(nil); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}
