package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// fakeBin is internal/fakeopenshell, built once for the package's tests:
// each test's own build was a second or more of linking, and the fake
// keeps its state where each test's environment says
// (FAKE_OPENSHELL_STATE, FAKE_OPENSHELL_LOG), not beside itself.
var fakeBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// fakeOpenShellBin is the fake CLI's path, built on first use.
func fakeOpenShellBin(t *testing.T) string {
	t.Helper()
	fakeBin.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			fakeBin.err = fmt.Errorf("go not on PATH: %w", err)
			return
		}
		if fakeBin.dir, err = os.MkdirTemp("", "realm-fakeopenshell-"); err != nil {
			fakeBin.err = err
			return
		}
		path := filepath.Join(fakeBin.dir, "openshell")
		if out, err := exec.Command(goBin, "build", "-o", path, "github.com/realm-dev/realm/internal/fakeopenshell").CombinedOutput(); err != nil {
			fakeBin.err = fmt.Errorf("build fake openshell: %w\n%s", err, out)
			return
		}
		fakeBin.path = path
	})
	if fakeBin.err != nil {
		t.Fatal(fakeBin.err)
	}
	return fakeBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeBin.dir != "" {
		os.RemoveAll(fakeBin.dir)
	}
	os.Exit(code)
}
