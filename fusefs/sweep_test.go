package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
)

// TestRmdirSweepsCrashTemps: until the mount-time sweep has run, a
// directory that holds only a crash's temps looks empty on the mount, and
// removing it must not fail ENOTEMPTY on a name no one can see. A temp
// this mount is using is kept, and with it the directory.
func TestRmdirSweepsCrashTemps(t *testing.T) {
	backing := t.TempDir()
	f, err := New(backing, Options{NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fs.NewNodeFS(f.Root(), &fs.Options{RootStableAttr: f.RootStableAttr()})
	// No Scan: the sweep has not reached anything yet.
	for _, d := range []string{"crashed", "busy"} {
		if err := os.Mkdir(filepath.Join(backing, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"crashed/" + TempPrefix + "1", "crashed/" + TempPrefix + "2", "busy/" + TempPrefix + "3"} {
		if err := os.WriteFile(filepath.Join(backing, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.engine.TempMade(TempPrefix+"3", true)
	ctx := context.Background()
	if errno := f.root.Rmdir(ctx, "crashed"); errno != 0 {
		t.Errorf("rmdir of a directory holding only a crash's temps: %v", errno)
	}
	if _, err := os.Lstat(filepath.Join(backing, "crashed")); !os.IsNotExist(err) {
		t.Errorf("crashed: %v, want it gone", err)
	}
	if errno := f.root.Rmdir(ctx, "busy"); errno == 0 {
		t.Error("rmdir removed a directory holding a temp in use")
	}
	if _, err := os.Lstat(filepath.Join(backing, "busy", TempPrefix+"3")); err != nil {
		t.Errorf("the temp in use: %v", err)
	}
}
