package journal

import (
	"os"
	"testing"

	"github.com/realm-dev/realm/internal/lockorder"
)

// TestMain fails the tests if, built with the tag lockdep, any of them
// took a lock out of the order (internal/lockorder).
func TestMain(m *testing.M) { os.Exit(lockorder.RunTests(m)) }
