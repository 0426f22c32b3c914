package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestPrinterEscapesCallersBytes: a path and a program name are the
// caller's to choose (a file name, prctl(PR_SET_NAME)); printed raw, a
// newline forged a row of realmfs audit's table and an escape sequence
// reached the reader's terminal. They are Go-quoted.
func TestPrinterEscapesCallersBytes(t *testing.T) {
	ev := Event{Op: "open", Path: ".env.x\n2026-12-04T00:00:00Z  open  forged", Comm: "x\x1b]0;pwned\x07"}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	NewPrinter(&out, false).Print(raw, Filter{})
	got := out.String()
	if n := strings.Count(got, "\n"); n != 1 {
		t.Errorf("one event printed as %d lines:\n%s", n, got)
	}
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("control bytes reach the terminal: %q", got)
	}
	for _, tc := range []struct{ in, want string }{
		{"/workspace/src/main.go", "/workspace/src/main.go"},
		{"caf\u00e9 \u65e5\u672c \"q\" a\\b", "caf\u00e9 \u65e5\u672c \"q\" a\\b"}, // printable: as is
		{"a\nb", `"a\nb"`},
		{"\x1b[2Jx", `"\x1b[2Jx"`},
		{"bell\a", `"bell\a"`},
		{"tab\there", `"tab\there"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"rlo\u202egnp.exe", `"rlo\u202egnp.exe"`},
		{"del\x7f", `"del\x7f"`},
		{"c1\u009b", `"c1\u009b"`},
		{"\ufffd", "\ufffd"}, // the replacement rune itself, valid UTF-8
		{"", ""},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
