package jsontime

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/realm-dev/realm/internal/testseed"
)

var timeSeed = flag.Uint64("jsontime.seed", 0, "TestAppend: replay the times of this seed (0: from the clock)")

// TestAppend: Append writes what time.Time's MarshalJSON writes,
// for UTC times and times of offset zero in another zone (written by
// hand), with nanoseconds that end in zeros or are none, at the ends of
// the years RFC 3339 writes, and for times of other offsets. Seeded; the
// seed is printed.
func TestAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t, *timeSeed, "jsontime.seed"), 0))
	base := time.Date(2026, 12, 7, 23, 59, 59, 0, time.UTC)
	times := []time.Time{base, base.Add(1), base.Add(100 * time.Millisecond), base.Add(time.Second), base.Add(999999999),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		base.In(time.FixedZone("x", 3600)), base.Add(5e8).In(time.FixedZone("y", -5400)),
		base.Add(12345).In(time.FixedZone("zero", 0)), time.Unix(1796678456, 530728121), time.Unix(0, 0)}
	for range 2000 {
		at := base.Add(time.Duration(r.Int64N(int64(72 * time.Hour))))
		if r.IntN(4) == 0 {
			at = at.Truncate(time.Duration([]int64{1e3, 1e6, 1e8, 1e9}[r.IntN(4)]))
		}
		times = append(times, at, at.Add(time.Duration(r.IntN(1e9))))
	}
	for _, at := range times {
		want, err := at.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, at); !bytes.Equal(got, want) {
			t.Fatalf("Append(%v) = %s, want %s", at, got, want)
		}
	}
}
