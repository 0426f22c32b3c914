package journal

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestEncodeMatchesJSON: the hand-written encoder writes each line as
// encoding/json does, byte for byte, and decodeLine reads it back.
func TestEncodeMatchesJSON(t *testing.T) {
	at := time.Date(2026, 12, 3, 17, 0, 0, 123456789, time.UTC)
	obj := &Object{Type: "file", Dev: 2049, Ino: 131, Mode: 0o100644, Uid: 1000, Gid: 1000, Size: 812, Mtime: at, Atime: at.Add(-time.Hour)}
	for _, tc := range []struct {
		name string
		l    line
	}{
		{"end", line{Seq: 42, End: Done}},
		{"end with after", line{Seq: 43, End: Done, After: &ID{2049, 978}}},
		{"rewrite", line{Seq: 42, Time: at, Owner: "session:7", Session: "7", Op: OpRewrite, Path: "src/a.go", Kept: true, Before: obj, After: &ID{2049, 977}}},
		{"rename replacing", line{Seq: 9, Time: at, Owner: "cgroup:/user.slice/a b", Op: OpRename, Path: "x", To: "y", Before: obj, Replaced: obj}},
		{"escapes", line{Seq: 1, Time: at, Owner: "pid:1", Op: OpCreate, Path: "a\"b\\c\nd\te\x01f<g>&h\u2028i\u2029j\x7fé"}},
		{"path not UTF-8", line{Seq: 2, Time: at, Owner: "pid:1", Op: OpUnlink, Path: "bad\xff\xfe", To: "ok"}},
		{"owner not UTF-8", line{Seq: 3, Time: at, Owner: "cgroup:/\xff", Op: OpMkdir, Path: "d"}},
		{"zero times", line{Seq: 4, Time: at, Owner: "o", Op: OpChmod, Path: "f", Before: &Object{Type: "file"}}},
		{"generation, and a ctime never written", line{Seq: 5, Time: at, Owner: "o", Op: OpChown, Path: "f",
			Before: &Object{Type: "file", Ino: 7, Gen: 1<<40 | 99, Ctime: at}}},
		{"end with the ctime left", line{Seq: 5, End: Done, Ctime: at}},
		{"an owner's incarnation", line{Seq: 6, Time: at, Owner: "session:7", OwnerAt: "4242-196df20c", Op: OpCreate, Path: "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			must(t, enc.Encode(&tc.l))
			got, err := tc.l.encode()
			must(t, err)
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("encode:\n got %s\nwant %s", got, want.Bytes())
			}
			back, err := decodeLine(bytes.TrimSuffix(got, []byte("\n")))
			must(t, err)
			if back.Path != tc.l.Path || back.Seq != tc.l.Seq || back.Op != tc.l.Op || !back.Ctime.Equal(tc.l.Ctime) || back.OwnerAt != tc.l.OwnerAt ||
				tc.l.Before != nil && back.Before.Gen != tc.l.Before.Gen {
				t.Errorf("decoded back as %+v", back)
			}
		})
	}
}

// TestOwnerStartRoundTrip: a record's incarnation (OwnerStart) goes to
// its line as owner_start and comes back; a record without one (a cgroup
// owner's, or one written before incarnations were) has no such field,
// and reads back as "".
func TestOwnerStartRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	for _, rec := range []Record{
		{Seq: 1, Time: at, Owner: "session:7", OwnerStart: "4242-196df20c", Op: OpCreate, Path: "a"},
		{Seq: 2, Time: at, Owner: "pid:9", OwnerStart: "17", Op: OpRewrite, Path: "b"},
		{Seq: 3, Time: at, Owner: "cgroup:/user.slice/user@1000.service/app.slice", Op: OpMkdir, Path: "d"},
	} {
		l := intentLine(&rec)
		b, err := l.encode()
		must(t, err)
		if has := bytes.Contains(b, []byte(`"owner_start":`)); has != (rec.OwnerStart != "") {
			t.Errorf("%s: owner_start written: %v, want %v", b, has, rec.OwnerStart != "")
		}
		back, err := decodeLine(bytes.TrimSuffix(b, []byte("\n")))
		must(t, err)
		if got := back.record(); got.Owner != rec.Owner || got.OwnerStart != rec.OwnerStart {
			t.Errorf("%s read back as owner %q start %q", b, got.Owner, got.OwnerStart)
		}
	}
	old, err := decodeLine([]byte(`{"seq":4,"time":"2026-12-03T17:00:00Z","owner":"session:7","op":"create","path":"c"}`))
	must(t, err)
	if r := old.record(); r.OwnerStart != "" {
		t.Errorf("a record from before incarnations: start %q", r.OwnerStart)
	}
}

func BenchmarkEncode(b *testing.B) {
	at := time.Now()
	obj := &Object{Type: "file", Dev: 2049, Ino: 131, Mode: 0o100644, Uid: 1000, Gid: 1000, Size: 812, Mtime: at, Atime: at}
	l := line{Seq: 42, Time: at, Owner: "cgroup:/user.slice/user-1000.slice/session-3.scope", Op: OpRewrite, Path: "src/pkg/a.go", Kept: true, Before: obj, After: &ID{2049, 977}}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) { // what encode replaced
		for b.Loop() {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(&l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
