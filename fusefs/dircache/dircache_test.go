package dircache

import (
	"os"
	"path/filepath"
	"syscall"
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
	_, first := c.install(&a, open("a"))
	if !first {
		t.Error("a's first install is not first")
	}
	fdB, _ := c.install(&b, open("b"))
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
		fd, ok := c.openByHandle(&a)
		if !ok {
			t.Error("a's directory does not reopen by the handle kept at its close")
		} else {
			var st, want unix.Stat_t
			dirfd.Fstat(fd, &st)
			unix.Stat(filepath.Join(root, "a"), &want)
			if st.Ino != want.Ino {
				t.Errorf("a reopened by handle is inode %d, want %d", st.Ino, want.Ino)
			}
			if fd2, first := c.install(&a, fd); fd2 != fd || first {
				t.Errorf("reinstall of a = %d, first %v; want %d, not first", fd2, first, fd)
			}
			c.Unpin(&a)
		}
	}
	// b is pinned: forgetting it leaves the close to its last unpin.
	if fd, owned := c.forget(&b); fd != fdB || owned {
		t.Errorf("Forget(b) while pinned = %d, owned %v", fd, owned)
	}
	c.Unpin(&b)
	if fd := c.Pin(&b); fd != -1 {
		t.Errorf("a forgotten entry's fd stays open after its last unpin")
	}
}

// TestUse: a use opens an entry's fd by the caller's open the first time
// (no check: the caller verified it), keeps it while idle within the
// bound (checked at each use), and reopens it by its handle where the
// daemon may and the handle still leads to the directory (checked), else
// by the caller's open again. A failed check unpins the fd; Forget hands
// the watch's removal an fd of the directory.
func TestUse(t *testing.T) {
	root := t.TempDir()
	rootFd, err := dirfd.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(rootFd)
	if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	var want unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "a"), &want); err != nil {
		t.Fatal(err)
	}
	var c Cache
	c.SetBound(1)
	c.OpenMountFd(rootFd)
	defer c.CloseMountFd()
	var e, other Entry
	var opens, checks int
	var refuse syscall.Errno
	ident := func() (uint64, uint64) { return want.Dev, want.Ino }
	open := func() (int, syscall.Errno) {
		opens++
		fd, err := dirfd.OpenDir(rootFd, "a")
		if err != nil {
			t.Fatal(err)
		}
		return fd, 0
	}
	check := func(int) syscall.Errno { checks++; return refuse }
	use := func(ident func() (uint64, uint64)) (bool, syscall.Errno) {
		t.Helper()
		fd, unpin, first, errno := c.Use(&e, ident, open, check)
		defer unpin()
		if errno == 0 {
			var st unix.Stat_t
			if dirfd.Fstat(fd, &st); st.Ino != want.Ino {
				t.Errorf("use: fd of inode %d, want %d", st.Ino, want.Ino)
			}
		}
		return first, errno
	}
	if first, errno := use(ident); !first || errno != 0 || opens != 1 || checks != 0 {
		t.Errorf("first use: first %v, %v, %d opens, %d checks; want first, opened, unchecked", first, errno, opens, checks)
	}
	if first, errno := use(ident); first || errno != 0 || opens != 1 || checks != 1 {
		t.Errorf("second use: first %v, %v, %d opens, %d checks; want the kept fd, checked", first, errno, opens, checks)
	}
	refuse = syscall.ESTALE
	if _, errno := use(ident); errno != syscall.ESTALE {
		t.Errorf("a refused check: %v, want ESTALE", errno)
	}
	refuse = 0
	// Another entry's use closes e's idle fd (the bound is 1), keeping
	// its handle where the daemon may.
	evict := func() {
		t.Helper()
		fd, err := dirfd.OpenDir(rootFd, "a")
		if err != nil {
			t.Fatal(err)
		}
		c.install(&other, fd)
		c.Unpin(&other)
		if fd := c.Pin(&e); fd != -1 {
			t.Fatalf("e's idle fd %d is kept beyond the bound", fd)
		}
	}
	evict()
	opens, checks = 0, 0
	if _, errno := use(ident); errno != 0 {
		t.Fatal(errno)
	}
	byHandle := unix.Geteuid() == 0
	if byHandle && (opens != 0 || checks != 1) || !byHandle && (opens != 1 || checks != 0) {
		t.Errorf("reopen (by handle: %v): %d opens, %d checks", byHandle, opens, checks)
	}
	evict()
	opens, checks = 0, 0
	if _, errno := use(func() (uint64, uint64) { return want.Dev, want.Ino + 1 }); errno != 0 || opens != 1 || checks != 0 {
		t.Errorf("reopen of another directory's handle: %v, %d opens, %d checks; want it opened by name", errno, opens, checks)
	}
	var marked []int
	c.Forget(&e, func(fd int) { marked = append(marked, fd) }, true)
	if len(marked) != 1 || marked[0] < 0 {
		t.Errorf("forget of an entry with its fd open handed the watch %v, want its fd", marked)
	}
	if fd := c.Pin(&e); fd != -1 {
		t.Errorf("a forgotten entry still has its fd %d", fd)
	}
	// other's fd was closed for the bound: a fanotify mark is removed by
	// an fd of the handle kept, where the daemon may open one.
	marked = nil
	c.Forget(&other, func(fd int) { marked = append(marked, fd) }, true)
	if len(marked) != 1 || (marked[0] >= 0) != byHandle {
		t.Errorf("forget of an entry with no fd open handed the watch %v (by handle: %v)", marked, byHandle)
	}
}
