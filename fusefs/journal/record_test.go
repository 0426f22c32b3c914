package journal

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRecordsRoundTrip: what Begin and its end write is what Records
// reads back, field for field, before and after a reopen; a path that is
// not UTF-8 comes back byte for byte.
func TestRecordsRoundTrip(t *testing.T) {
	b := newBacking(t)
	clk := newClock()
	j := b.open(t, Options{Now: clk.Now})
	b.write(t, "src/a.go", "old")
	b.write(t, "src/b.go", "other")
	a := ObjectOf(b.stat(t, "src/a.go"))
	other := ObjectOf(b.stat(t, "src/b.go"))
	made := &ID{Dev: 7, Ino: 977}
	type step struct {
		rec   Record
		keep  string // a path to keep by link, "" for none
		end   End    // "" leaves it in flight
		after *ID    // what Done says
	}
	steps := []step{
		{rec: Record{Owner: "session:7", Session: "s7", Op: OpRewrite, Path: "src/a.go", Before: a, After: made}, keep: "src/a.go", end: Done},
		{rec: Record{Owner: "pid:12", Op: OpCreate, Path: "new <&> file"}, end: Done, after: made},
		{rec: Record{Owner: "cgroup:/x.slice", Op: OpRename, Path: "src/b.go", To: "dir é/ü", Before: other, Replaced: a}, keep: "src/a.go", end: Aborted},
		{rec: Record{Owner: "session:7", Op: OpMkdir, Path: "bad\xff\xfe/name"}, end: Done, after: &ID{Dev: 1, Ino: 2}},
		{rec: Record{Owner: "session:7", Op: OpAppend, Path: "src/b.go", Before: other}, end: Done},
		{rec: Record{Owner: "session:8", Op: OpChmod, Path: "src/b.go", Before: other}},
	}
	var want []Record
	for _, s := range steps {
		keep := NoKeep
		if s.keep != "" {
			keep = b.pathFd(t, s.keep)
		}
		c, err := j.Begin(s.rec, keep)
		must(t, err)
		r := s.rec
		r.Seq, r.Kept, r.End = c.Seq(), s.keep != "", s.end
		switch s.end {
		case Done:
			must(t, c.Done(s.after))
			if r.After == nil {
				r.After = s.after
			}
		case Aborted:
			must(t, c.Abort())
		}
		want = append(want, r)
	}
	got, err := j.Records(Filter{})
	must(t, err)
	for i := range min(len(got), len(want)) { // Begin stamps each by the clock, which only goes on
		if i > 0 && !got[i].Time.After(got[i-1].Time) {
			t.Errorf("record %d at %v, not after the one before", got[i].Seq, got[i].Time)
		}
		want[i].Time = got[i].Time
	}
	checkRecords(t, "open", got, want)

	raw, err := os.ReadFile(b.jpath(logName, segmentName(1)))
	must(t, err)
	for _, s := range []string{`"path":"new <&> file"`, `"to":"dir é/ü"`, `"path":{"bytes":"YmFk//4vbmFtZQ=="}`, `{"seq":1,"end":"done"}`} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("the segment does not hold %s", s)
		}
	}
	if _, err := os.Lstat(b.jpath(keptName, "3")); !os.IsNotExist(err) {
		t.Errorf("an aborted change's kept link is still there: %v", err)
	}

	must(t, j.Close())
	j = b.open(t, Options{Now: clk.Now})
	if rc := j.Recovery(); rc.Records != len(steps) || rc.Done != 1 || rc.Aborted+rc.Outside != 0 {
		t.Errorf("reopened: %+v, want %d records and the chmod in flight resolved done", rc, len(steps))
	}
	want[len(want)-1].End = Done // in place: the identity cannot tell, so done
	got, err = j.Records(Filter{})
	must(t, err)
	checkRecords(t, "reopened", got, want)
}

// checkRecords compares records by their JSON, which says where they
// differ readably.
func checkRecords(t *testing.T, when string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records, want %d", when, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if !reflect.DeepEqual(got[i], want[i]) && string(g) != string(w) {
			t.Errorf("%s: record %d\n got %s\nwant %s", when, i, g, w)
		}
	}
}

// TestFilter: Records selects by owner, time and seq.
func TestFilter(t *testing.T) {
	b := newBacking(t)
	clk := newClock()
	j := b.open(t, Options{Now: clk.Now, SegmentSize: 1024})
	var mid time.Time
	for i := range 60 { // several segments
		owner := []string{"session:1", "session:2", "pid:3"}[i%3]
		if i == 30 {
			clk.advance(time.Hour)
			mid = clk.Now()
		}
		c, err := j.Begin(Record{Owner: owner, Op: OpCreate, Path: "f"}, NoKeep)
		must(t, err)
		must(t, c.Done(nil))
	}
	if len(j.segs) < 3 {
		t.Fatalf("%d segments: the test wants several", len(j.segs))
	}
	for _, tc := range []struct {
		name  string
		f     Filter
		seqs  []uint64 // first, last
		count int
	}{
		{"all", Filter{}, []uint64{1, 60}, 60},
		{"owner", Filter{Owner: "session:2"}, []uint64{2, 59}, 20},
		{"since", Filter{Since: mid}, []uint64{31, 60}, 30},
		{"from", Filter{From: 45}, []uint64{45, 60}, 16},
		{"to", Filter{To: 10}, []uint64{1, 10}, 10},
		{"range and owner", Filter{From: 10, To: 20, Owner: "pid:3"}, []uint64{12, 18}, 3},
		{"none", Filter{Owner: "nobody"}, nil, 0},
	} {
		got, err := j.Records(tc.f)
		must(t, err)
		if len(got) != tc.count {
			t.Errorf("%s: %d records, want %d", tc.name, len(got), tc.count)
			continue
		}
		if tc.count > 0 && (got[0].Seq != tc.seqs[0] || got[len(got)-1].Seq != tc.seqs[1]) {
			t.Errorf("%s: seqs %d…%d, want %d…%d", tc.name, got[0].Seq, got[len(got)-1].Seq, tc.seqs[0], tc.seqs[1])
		}
		for _, r := range got {
			if r.End != Done {
				t.Errorf("%s: record %d has end %q", tc.name, r.Seq, r.End)
			}
		}
	}
}

// TestPathJSON: every byte string survives a record's JSON.
func TestPathJSON(t *testing.T) {
	for _, p := range []string{"", "a/b", "é", "\xff", "a\x00b", "\\x41", `"q"`, "\u2028", strings.Repeat("\xc3", 3)} {
		l := line{Seq: 1, Op: OpCreate, Path: pathJSON(p), To: pathJSON(p)}
		b, err := l.encode()
		must(t, err)
		if strings.Count(string(b), "\n") != 1 || strings.ContainsRune(string(b[:len(b)-1]), 0) {
			t.Errorf("%q: the line %q is not one line", p, b)
		}
		back, err := decodeLine(b[:len(b)-1])
		must(t, err)
		if string(back.Path) != p || string(back.To) != p {
			t.Errorf("%q came back %q, %q", p, back.Path, back.To)
		}
	}
}
