package keptname

import (
	"math"
	"strings"
	"testing"
)

// TestNameParse: a described name reads back as the fields it was made
// of, whatever bytes they hold, and is a name of one directory entry;
// fields too long for a name, whatever the seq, make none.
func TestNameParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  uint64
		f    Fields
		fits bool
	}{
		{"plain", 7, Fields{Owner: "session:12", OwnerStart: "123-456", Path: "src/main.go"}, true},
		{"a session", 8, Fields{Owner: "pid:3", Session: "s-1", Path: "a"}, true},
		{"separators in fields", 9, Fields{Owner: "cgroup:/user.slice/a~b", OwnerStart: "%", Session: "x/y", Path: "d~e/%41/f~"}, true},
		{"not UTF-8", 10, Fields{Owner: "pid:1", Path: "bad\xff/name\x01"}, true},
		{"dots", 11, Fields{Owner: "pid:1", Path: "../.."}, true},
		{"too long", 12, Fields{Owner: "pid:1", Path: strings.Repeat("d/", 120)}, false},
		{"long enough for a short seq only", 12, Fields{Owner: "pid:1", Path: strings.Repeat("a", 230)}, false},
		{"long, for any seq", 12, Fields{Owner: "pid:1", Path: strings.Repeat("a", 226)}, true},
		{"no path", 13, Fields{Owner: "pid:1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, fits := Name(tc.seq, tc.f, 255)
			if fits != tc.fits {
				t.Fatalf("%q fits %v, want %v", name, fits, tc.fits)
			}
			// Fits counts what the longest seq's name would take.
			if longest := len(AppendName(nil, math.MaxUint64, tc.f)); fits != (longest <= 255 && tc.f.Path != "") {
				t.Fatalf("%q fits %v, but the longest seq's name is %d bytes", name, fits, longest)
			}
			if !fits {
				return
			}
			if strings.Contains(name, "/") || len(name) > 255 {
				t.Fatalf("%q is no name of a directory entry", name)
			}
			e, ok := Parse(name)
			if want := (Entry{Name: name, Seq: tc.seq, Fields: tc.f}); !ok || e != want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", name, e, ok, want)
			}
			if seq, ok := Seq(name); !ok || seq != tc.seq {
				t.Errorf("Seq(%q) = %d, %v", name, seq, ok)
			}
		})
	}
	if _, fits := Name(1, Fields{Owner: "pid:1", Path: "a/b"}, 25); fits {
		t.Errorf("a described name of 34 bytes fits in 25")
	}
	for _, bad := range []string{"7", "7~a~b~c", "x~a~b~c~d", "7~a~b~c~", "7~%4~b~c~d", "7~a~b~c~d~e", "0~a~b~c~d"} {
		if e, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %+v, want no described name", bad, e)
		}
	}
	if seq, ok := Seq("42"); !ok || seq != 42 || Plain(42) != "42" {
		t.Errorf("Seq(42) = %d, %v; Plain(42) = %q", seq, ok, Plain(42))
	}
}
