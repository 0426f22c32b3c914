package lockorder

import (
	"fmt"
	"os"
	"strings"
)

// Marker starts every report, as "WARNING: DATA RACE" starts the race
// detector's: the e2e harness looks for it in a daemon's output.
const Marker = "LOCK ORDER VIOLATION"

// Violation is one breach of the order: Taking (a lock's class, or an
// assertion's what) while Held was held, with the stack of each.
type Violation struct {
	Taking, Held           string
	TakingStack, HeldStack string
	// Repeats counts the same breach (same classes, same places) seen
	// again after this one was reported.
	Repeats int
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s while holding %s\n\n%s at:\n%s\n%s taken at:\n%s",
		Marker, v.Taking, v.Held, v.Taking, indent(v.TakingStack), v.Held, indent(v.HeldStack))
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t") + "\n"
}

// RunTests runs a package's tests (m is its *testing.M) and fails them
// if a violation was reported meanwhile, though every test passed: the
// TestMain of a package whose locks are of the order.
func RunTests(m interface{ Run() int }) int {
	code := m.Run()
	if vs := Violations(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "lockorder: %d violation(s) of the lock order:\n", len(vs))
		for _, v := range vs {
			fmt.Fprintf(os.Stderr, "%v(seen %d more times)\n\n", v, v.Repeats)
		}
		if code == 0 {
			code = 1
		}
	}
	for i, n := range knownSeen() {
		if n > 0 {
			b := known[i]
			fmt.Fprintf(os.Stderr, "lockorder: a known breach, %s while holding %s in %s, seen %d times\n", b.taking, b.held.name, b.via, n)
		}
	}
	return code
}
