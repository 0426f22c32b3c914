package dircache

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// TestIdleBoundAndForget: unpinned fds beyond the bound are closed, the
// least recently used first, keeping a handle to reopen the directory by
// (where the daemon may open handles); a forgotten entry's fd is the
// caller's if unpinned, else closed at its last unpin.
func TestIdleBoundAndForget(t *testing.T) {
	root := t.TempDir()
	rootFd, err := dirfd.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(rootFd)
	var c Cache
	c.SetBound(1)
	c.OpenMountFd(rootFd)
	defer c.CloseMountFd()
	open := func(name string) int {
		t.Helper()
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		fd, err := dirfd.OpenDir(rootFd, name)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	var a, b Entry
	if fd := c.Pin(&a); fd != -1 {
		t.Fatalf("Pin of an entry never installed = %d", fd)
	}
	_, first := c.Install(&a, open("a"))
	if !first {
		t.Error("a's first install is not first")
	}
	fdB, _ := c.Install(&b, open("b"))
	c.Unpin(&a)
	c.Unpin(&b) // a, the least recently used, goes
	if got := c.Idle(); got != 1 {
		t.Errorf("%d idle, want the bound 1", got)
	}
	if fd := c.Pin(&a); fd != -1 {
		t.Errorf("a still has an fd (%d) beyond the bound", fd)
	}
	if fd := c.Pin(&b); fd != fdB {
		t.Errorf("Pin(b) = %d, want %d", fd, fdB)
	}
	if unix.Geteuid() == 0 {
		fd, ok := c.OpenByHandle(&a)
		if !ok {
			t.Error("a's directory does not reopen by the handle kept at its close")
		} else {
			var st, want unix.Stat_t
			dirfd.Fstat(fd, &st)
			unix.Stat(filepath.Join(root, "a"), &want)
			if st.Ino != want.Ino {
				t.Errorf("a reopened by handle is inode %d, want %d", st.Ino, want.Ino)
			}
			if fd2, first := c.Install(&a, fd); fd2 != fd || first {
				t.Errorf("reinstall of a = %d, first %v; want %d, not first", fd2, first, fd)
			}
			c.Unpin(&a)
		}
	}
	// b is pinned: forgetting it leaves the close to its last unpin.
	if fd, owned := c.Forget(&b); fd != fdB || owned {
		t.Errorf("Forget(b) while pinned = %d, owned %v", fd, owned)
	}
	c.Unpin(&b)
	if fd := c.Pin(&b); fd != -1 {
		t.Errorf("a forgotten entry's fd stays open after its last unpin")
	}
}
