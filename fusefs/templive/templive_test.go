package templive

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

func openRoot(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	fd, err := dirfd.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirfd.Close(fd) })
	return dir, fd
}

// TestOrphaned: a temp of a daemon alive (its mark locked) is not
// orphaned, in any directory; once the daemon is gone, by Release or by a
// death that leaves its mark unlocked, it is; so is a temp named by no
// instance. A claim removes the marks of daemons gone, and the marks'
// directory keeps git quiet.
func TestOrphaned(t *testing.T) {
	dir, root := openRoot(t)
	m, err := Claim(root)
	if err != nil {
		t.Fatal(err)
	}
	temp := m.TempPrefix() + "0123456789abcdef"
	if Orphaned(root, temp) {
		t.Error("a live daemon's temp taken for a crash's")
	}
	other, err := Claim(root)
	if err != nil {
		t.Fatal(err)
	}
	if other.TempPrefix() == m.TempPrefix() {
		t.Fatal("two claims, one instance")
	}
	// Killed: its descriptor closed by the kernel, the mark left named.
	dirfd.Close(other.fd)
	otherMark := filepath.Join(dir, Dir, other.inst)
	if _, err := os.Lstat(otherMark); err != nil {
		t.Fatalf("the dead daemon's mark: %v", err)
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{other.TempPrefix() + "aa", true},
		{Prefix + "0011223344556677", true},     // a temp from before instances
		{Prefix + "undo-42", true},              // undo's
		{Prefix + "zz11223344556677-x", true},   // not hex: no instance
		{Prefix + "8899aabbccddeeff-x", true},   // an instance with no mark
		{m.TempPrefix() + "in/a/subdir", false}, // a live one's, wherever it is
	} {
		if got := Orphaned(root, tc.name); got != tc.want {
			t.Errorf("Orphaned(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	third, err := Claim(root)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release(root)
	if _, err := os.Lstat(otherMark); !os.IsNotExist(err) {
		t.Errorf("a claim left a dead daemon's mark: %v", err)
	}
	if Orphaned(root, temp) {
		t.Error("a claim took a live daemon's mark for a dead one's")
	}
	if b, err := os.ReadFile(filepath.Join(dir, Dir, ".gitignore")); err != nil || string(b) != "*\n" {
		t.Errorf("the marks' .gitignore: %q, %v", b, err)
	}
	if err := m.Release(root); err != nil {
		t.Fatal(err)
	}
	if !Orphaned(root, temp) {
		t.Error("a released daemon's temp is still taken for a live one's")
	}
}
