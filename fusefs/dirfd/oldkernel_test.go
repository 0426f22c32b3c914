package dirfd

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/internal/sysfail"
)

// The calls this layer uses that are newer than the oldest kernel realm
// supports (docs/realmfs.md, Kernels: Linux 5.10) each have a fallback. These tests take the
// call away with a seccomp filter on one thread, as an older kernel would
// (ENOSYS), and run the layer there.

// withoutCalls runs fn on a fresh thread on which the system calls nrs
// answer ENOSYS; the thread ends with fn, and the layer's fallback switches
// are reset afterwards.
func withoutCalls(t *testing.T, nrs []uintptr, fn func()) {
	t.Helper()
	t.Cleanup(func() {
		noOpenat2.Store(false)
		noFchmodat2.Store(false)
		noGetxattrat.Store(false)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the filtered thread dies with this goroutine
		var rules []sysfail.Rule
		for _, nr := range nrs {
			rules = append(rules, sysfail.Rule{Nr: nr, Arg: -1, Errno: syscall.ENOSYS})
		}
		if err := sysfail.Install(rules, false); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

func TestChmodWithoutFchmodat2(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	withoutCalls(t, []uintptr{unix.SYS_FCHMODAT2}, func() {
		if err := fchmodat2(rfd, "", 0o755, unix.AT_EMPTY_PATH); err != unix.ENOSYS {
			t.Errorf("the filter let fchmodat2 through: %v", err)
		}
		dir, err := OpenDir(rfd, "a")
		if err != nil {
			t.Error(err)
			return
		}
		defer Close(dir)
		fd, err := OpenPath(dir, "b")
		if err != nil {
			t.Error(err)
			return
		}
		defer Close(fd)
		if err := Chmod(fd, 0o701); err != nil {
			t.Errorf("chmod of an O_PATH fd without fchmodat2: %v", err)
		}
		link, err := OpenPath(rfd, "abs")
		if err != nil {
			t.Error(err)
			return
		}
		defer Close(link)
		if err := Chmod(link, 0o700); err != unix.EOPNOTSUPP {
			t.Errorf("chmod of a symlink without fchmodat2: %v, want EOPNOTSUPP", err)
		}
		if !noFchmodat2.Load() {
			t.Error("the fallback was not taken")
		}
	})
	st, err := os.Stat(filepath.Join(root, "a", "b"))
	must(t, err)
	if st.Mode().Perm() != 0o701 {
		t.Errorf("mode is %v, want 0701", st.Mode().Perm())
	}
	if st, err := os.Lstat(filepath.Join(root, "abs")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink changed: %v, %v", st, err)
	}
}

func TestOpenWithoutOpenat2(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	withoutCalls(t, []uintptr{unix.SYS_OPENAT2}, func() {
		dir, err := OpenDir(rfd, "a")
		if err != nil {
			t.Errorf("OpenDir without openat2: %v", err)
			return
		}
		defer Close(dir)
		if !noOpenat2.Load() {
			t.Error("the fallback was not taken")
		}
		sub, err := OpenDir(dir, "b")
		if err != nil {
			t.Error(err)
			return
		}
		defer Close(sub)
		fd, err := Open(sub, "file", unix.O_RDONLY, 0)
		if err != nil {
			t.Errorf("Open without openat2: %v", err)
			return
		}
		if got := readAll(t, fd); got != "inside" {
			t.Errorf("read %q", got)
		}
		Close(fd)
		// The fallback follows no symlink either.
		for _, name := range []string{"link-out", "abs", "chain1"} {
			if fd, err := Open(rfd, name, unix.O_RDONLY, 0); !errors.Is(err, ErrEscape) {
				Close(fd)
				t.Errorf("Open(%s) without openat2: %v, want ErrEscape", name, err)
			}
			if fd, err := OpenDir(rfd, name); err == nil {
				Close(fd)
				t.Errorf("OpenDir(%s) without openat2 followed the link", name)
			}
		}
	})
}

// TestDirGetxattr: a directory's attribute read by getxattrat of "." and,
// without the call, through /proc/self/fd: the value, its size asked with
// no buffer, ERANGE for a short one, ENODATA for none.
func TestDirGetxattr(t *testing.T) {
	root, _ := tree(t)
	if err := unix.Setxattr(filepath.Join(root, "a"), "user.realm-test", []byte("value-of-a"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", root, err)
	}
	rfd := openRoot(t, root)
	check := func(how string) {
		dir, err := OpenDir(rfd, "a")
		if err != nil {
			t.Error(err)
			return
		}
		defer Close(dir)
		buf := make([]byte, 64)
		if n, err := DirGetxattr(dir, "user.realm-test", buf); err != nil || string(buf[:n]) != "value-of-a" {
			t.Errorf("%s: %q, %v; want value-of-a", how, buf[:max(n, 0)], err)
		}
		if n, err := DirGetxattr(dir, "user.realm-test", nil); err != nil || n != len("value-of-a") {
			t.Errorf("%s: size %d, %v; want %d", how, n, err, len("value-of-a"))
		}
		if _, err := DirGetxattr(dir, "user.realm-test", buf[:3]); err != unix.ERANGE {
			t.Errorf("%s: a short buffer: %v, want ERANGE", how, err)
		}
		if _, err := DirGetxattr(dir, "user.realm-none", buf); err != unix.ENODATA {
			t.Errorf("%s: no attribute: %v, want ENODATA", how, err)
		}
		if _, err := DirGetxattr(rfd, "user.realm-test", buf); err != unix.ENODATA {
			t.Errorf("%s: the root, which has none: %v, want ENODATA", how, err)
		}
	}
	check("getxattrat")
	if noGetxattrat.Load() {
		t.Log("this kernel has no getxattrat: both runs went through /proc")
	}
	withoutCalls(t, []uintptr{unix.SYS_GETXATTRAT}, func() {
		check("without getxattrat")
		if !noGetxattrat.Load() {
			t.Error("the fallback was not taken")
		}
	})
}
