package journal

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal/carry"
)

// ordered is a durable journal as on ext4 with a jbd2 journal: its
// intents carried in LOCK's attribute (package carry).
var ordered = Options{Durable: true, Ordered: true}

// carried is what LOCK's attribute holds.
func (b *backing) carried(t *testing.T) string {
	t.Helper()
	v, err := unix.Getxattr(b.jpath(lockName), carry.Attr, make([]byte, 64<<10))
	if err == unix.ENODATA {
		return ""
	}
	must(t, err)
	buf := make([]byte, v)
	n, err := unix.Getxattr(b.jpath(lockName), carry.Attr, buf)
	must(t, err)
	return string(buf[:n])
}

// TestCarriedLostRebuilt: with the carry on, a change's intent is held,
// not written, and set in LOCK's attribute before the change is made; a
// kill -9 that loses the held lines leaves the attribute, from which a
// Reader lists the intent and the next Open rebuilds it and ends it by
// what its names lead to, as it does an intent the log kept (the crash
// cases of TestRecoveryByIdentity). The attribute is empty after.
func TestCarriedLostRebuilt(t *testing.T) {
	for _, cc := range crashCases {
		for _, o := range []outcome{happened, notMade} {
			t.Run(cc.name+"/"+o.String(), func(t *testing.T) {
				b := newBacking(t)
				cc.setup(t, b)
				j := b.open(t, ordered)
				if j.carry == nil {
					t.Fatal("no carry with Options.Ordered")
				}
				seq := cc.begin(t, b, j)
				if o != notMade {
					cc.change(t, b, seq)
				}
				described := strings.Contains(b.keptPath(seq), "~")
				if carried := b.carried(t); !described && !strings.Contains(carried, `"seq":`+strconv.FormatUint(seq, 10)+`,`) {
					t.Fatalf("LOCK carries %q, want intent %d", carried, seq)
				}
				j.crash()
				if seg, _ := os.ReadFile(b.jpath(logName, segmentName(1))); strings.Contains(string(seg), `"seq":`+strconv.FormatUint(seq, 10)+`,`) {
					t.Fatalf("intent %d was written before the crash; want it held:\n%s", seq, seg)
				}
				r := b.openReader(t)
				recs, err := r.Records(Filter{})
				must(t, err)
				if !described && (len(recs) != 1 || recs[0].Seq != seq || recs[0].End != "") {
					t.Errorf("a Reader after the crash lists %+v, want intent %d with no end", recs, seq)
				}
				tree := snapshot(t, b)

				j = b.open(t, ordered)
				rc := j.Recovery()
				wantEnd, counts := Done, [3]int{1, 0, 0}
				if o == notMade {
					wantEnd, counts = Aborted, [3]int{0, 1, 0}
				}
				if got := [4]int{rc.Rebuilt, rc.Done, rc.Aborted, rc.Outside}; got != [4]int{1, counts[0], counts[1], counts[2]} {
					t.Errorf("recovery %+v, want 1 rebuilt and done, aborted, outside = %v", rc, counts)
				}
				recs, err = j.Records(Filter{})
				must(t, err)
				if len(recs) != 1 || recs[0].Seq != seq || recs[0].End != wantEnd {
					t.Fatalf("records %+v, want %d ended %s", recs, seq, wantEnd)
				}
				checkKept(t, b, seq, map[bool]string{true: cc.kept, false: ""}[wantEnd == Done])
				if got := snapshot(t, b); got != tree {
					t.Errorf("recovery changed BACKING:\n%s\nwas\n%s", got, tree)
				}
				if got := b.carried(t); got != "" {
					t.Errorf("LOCK still carries %q after Open appended it", got)
				}
				j.crash()
				j = b.open(t, ordered)
				if rc := j.Recovery(); rc.Rebuilt+rc.Done+rc.Aborted != 0 {
					t.Errorf("a second Open rebuilt or resolved again: %+v", rc)
				}
			})
		}
	}
}

// TestCarryFull: intents past the carry's room are written through, which
// empties it, so it holds a bounded tail; a crash after many changes
// loses none of their records.
func TestCarryFull(t *testing.T) {
	b := newBacking(t)
	b.write(t, "f", "data")
	j := b.open(t, ordered)
	const n = 200
	most := 0
	for i := range n {
		c, err := j.Begin(Record{Owner: "pid:7", Op: OpChmod, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, NoKeep)
		must(t, err)
		must(t, os.Chmod(b.path+"/f", os.FileMode(0o600|i%2*0o040)))
		if i%3 == 0 {
			must(t, c.Done(nil)) // and the rest open: resolved by recovery
		}
		j.mu.Lock()
		most = max(most, j.carry.Len())
		j.mu.Unlock()
		if got := len(b.carried(t)); got > carry.DefaultMax {
			t.Fatalf("after %d intents LOCK carries %d bytes, more than %d", i+1, got, carry.DefaultMax)
		}
	}
	if most < 2 || most >= n {
		t.Fatalf("the carry held at most %d intents of %d, want a bounded tail", most, n)
	}
	j.crash()
	j = b.open(t, ordered)
	if rc := j.Recovery(); rc.Rebuilt == 0 || rc.Rebuilt > most {
		t.Errorf("recovery %+v, want 1 to %d rebuilt", rc, most)
	}
	recs, err := j.Records(Filter{})
	must(t, err)
	if len(recs) != n {
		t.Fatalf("%d records after the crash, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) || r.Op != OpChmod || r.End != Done {
			t.Fatalf("record %d: %+v, want chmod %d done", i, r, i+1)
		}
	}
}
