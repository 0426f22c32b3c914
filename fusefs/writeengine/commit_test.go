package writeengine

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// TestSideNameFits: a conflict or recovery copy's name fits NAME_MAX
// whatever the file's name, keeps its whole suffix, and does not cut a
// UTF-8 sequence.
func TestSideNameFits(t *testing.T) {
	at := time.Date(2026, 12, 1, 19, 0, 0, 5, time.UTC)
	for _, name := range []string{"f", strings.Repeat("a", 213), strings.Repeat("a", 240), strings.Repeat("é", 127) + "x"} {
		for _, n := range []int{0, 7} {
			got := sideName(name, "recovered", at, n)
			suffix := ".realm-recovered-20261201T190000.000000005Z"
			if n > 0 {
				suffix += "-7"
			}
			if len(got) > unix.NAME_MAX || !strings.HasSuffix(got, suffix) || !utf8.ValidString(got) || !strings.HasPrefix(name, strings.TrimSuffix(got, suffix)) {
				t.Errorf("sideName(%d bytes, %d) = %q (%d bytes)", len(name), n, got, len(got))
			}
		}
	}
}
