package dirfd

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

func TestIgnoringEINTR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errs  []error // what the call answers, one per attempt
		want  error
		calls int
	}{
		{"ok", []error{nil}, nil, 1},
		{"other error", []error{unix.ENOENT}, unix.ENOENT, 1},
		{"EINTR then ok", []error{unix.EINTR, nil}, nil, 2},
		{"EINTR twice then an error", []error{unix.EINTR, unix.EINTR, unix.EACCES}, unix.EACCES, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := ignoringEINTR(func() error {
				calls++
				return tc.errs[calls-1]
			})
			if err != tc.want || calls != tc.calls {
				t.Errorf("ignoringEINTR = %v after %d calls, want %v after %d", err, calls, tc.want, tc.calls)
			}
			calls = 0
			v, err := ignoringEINTR2(func() (int, error) {
				calls++
				return calls, tc.errs[calls-1]
			})
			if err != tc.want || calls != tc.calls || v != tc.calls {
				t.Errorf("ignoringEINTR2 = %d, %v after %d calls, want %d, %v", v, err, calls, tc.calls, tc.want)
			}
		})
	}
}

// eintrFS is a loopback filesystem whose next request of an armed kind
// answers EINTR, as a FUSE or NFS backing dir does when a signal (Go's
// preemption, SIGURG) interrupts the call.
type eintrFS struct {
	fuse.RawFileSystem
	mu    sync.Mutex
	armed string // the kind of request to fail next, "" for none
}

// arm makes the next request of kind answer EINTR.
func (e *eintrFS) arm(kind string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.armed = kind
}

// fired reports whether the armed failure was answered, and disarms.
func (e *eintrFS) fired() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := e.armed == ""
	e.armed = ""
	return ok
}

// fail reports whether a request of kind answers EINTR (once per arm).
func (e *eintrFS) fail(kind string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.armed != kind {
		return false
	}
	e.armed = ""
	return true
}

func (e *eintrFS) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if e.fail("lookup") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Lookup(c, h, name, out)
}

func (e *eintrFS) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if e.fail("getattr") {
		return fuse.EINTR
	}
	return e.RawFileSystem.GetAttr(c, in, out)
}

func (e *eintrFS) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if e.fail("getattr") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Statx(c, in, out)
}

func (e *eintrFS) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if e.fail("setattr") {
		return fuse.EINTR
	}
	return e.RawFileSystem.SetAttr(c, in, out)
}

func (e *eintrFS) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if e.fail("mkdir") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Mkdir(c, in, name, out)
}

func (e *eintrFS) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if e.fail("mknod") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Mknod(c, in, name, out)
}

func (e *eintrFS) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if e.fail("unlink") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Unlink(c, h, name)
}

func (e *eintrFS) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if e.fail("rmdir") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Rmdir(c, h, name)
}

func (e *eintrFS) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if e.fail("rename") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Rename(c, in, oldName, newName)
}

func (e *eintrFS) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if e.fail("link") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Link(c, in, name, out)
}

func (e *eintrFS) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if e.fail("symlink") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Symlink(c, h, target, name, out)
}

func (e *eintrFS) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if e.fail("readlink") {
		return nil, fuse.EINTR
	}
	return e.RawFileSystem.Readlink(c, h)
}

func (e *eintrFS) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if e.fail("getxattr") {
		return 0, fuse.EINTR
	}
	return e.RawFileSystem.GetXAttr(c, h, attr, dest)
}

func (e *eintrFS) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if e.fail("listxattr") {
		return 0, fuse.EINTR
	}
	return e.RawFileSystem.ListXAttr(c, h, dest)
}

func (e *eintrFS) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if e.fail("setxattr") {
		return fuse.EINTR
	}
	return e.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (e *eintrFS) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if e.fail("removexattr") {
		return fuse.EINTR
	}
	return e.RawFileSystem.RemoveXAttr(c, h, attr)
}

func (e *eintrFS) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if e.fail("open") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Open(c, in, out)
}

func (e *eintrFS) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if e.fail("copy") {
		return 0, fuse.EINTR
	}
	return e.RawFileSystem.CopyFileRange(c, in)
}

func (e *eintrFS) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if e.fail("readdir") {
		return fuse.EINTR
	}
	return e.RawFileSystem.ReadDirPlus(c, in, out)
}

func (e *eintrFS) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if e.fail("readdir") {
		return fuse.EINTR
	}
	return e.RawFileSystem.ReadDir(c, in, out)
}

func (e *eintrFS) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if e.fail("fsyncdir") {
		return fuse.EINTR
	}
	return e.RawFileSystem.FsyncDir(c, in)
}

func (e *eintrFS) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if e.fail("fsync") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Fsync(c, in)
}

func (e *eintrFS) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if e.fail("fallocate") {
		return fuse.EINTR
	}
	return e.RawFileSystem.Fallocate(c, in)
}

func (e *eintrFS) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if e.fail("statfs") {
		return fuse.EINTR
	}
	return e.RawFileSystem.StatFs(c, h, out)
}

// eintrMount mounts a loopback of a fresh directory (with a file f of
// some bytes, a directory d and a symlink l) through an eintrFS, uncached,
// so that every call reaches it; it returns the filesystem and an fd of
// the mount's root as OpenRoot gives.
func eintrMount(t *testing.T) (*eintrFS, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a FUSE mount needs root here")
	}
	under, mnt := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(under, "f"), []byte("data"), 0o644))
	must(t, os.Mkdir(filepath.Join(under, "d"), 0o755))
	must(t, os.Symlink("f", filepath.Join(under, "l")))
	root, err := fs.NewLoopbackRoot(under)
	must(t, err)
	zero := time.Duration(0)
	efs := &eintrFS{RawFileSystem: fs.NewNodeFS(root, &fs.Options{EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero})}
	server, err := fuse.NewServer(efs, mnt, &fuse.MountOptions{FsName: "eintr", DirectMount: true})
	if err != nil {
		t.Skipf("no FUSE mount here: %v", err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Unmount() })
	return efs, openRoot(t, mnt)
}

// TestEINTRIsRetried: every call of the layer that reaches the backing
// filesystem and may be interrupted there tries again where it answers
// EINTR, as the os package's calls do: the caller sees the call's own
// answer, never EINTR.
func TestEINTRIsRetried(t *testing.T) {
	efs, rfd := eintrMount(t)
	openFile := func(t *testing.T, flags int) int {
		fd, err := Open(rfd, "f", flags, 0)
		must(t, err)
		t.Cleanup(func() { Close(fd) })
		return fd
	}
	pathOf := func(t *testing.T, name string) int {
		fd, err := OpenPath(rfd, name)
		must(t, err)
		t.Cleanup(func() { Close(fd) })
		return fd
	}
	var st unix.Stat_t
	for _, tc := range []struct {
		kind, call string
		fn         func(t *testing.T) error
	}{
		{"lookup", "OpenDir", func(t *testing.T) error {
			fd, err := OpenDir(rfd, "d")
			Close(fd)
			return err
		}},
		{"open", "Open", func(t *testing.T) error {
			fd, err := Open(rfd, "f", unix.O_RDONLY, 0)
			Close(fd)
			return err
		}},
		{"open", "Reopen", func(t *testing.T) error {
			fd, err := Reopen(pathOf(t, "f"), unix.O_RDONLY)
			Close(fd)
			return err
		}},
		{"getattr", "Statx", func(t *testing.T) error { _, err := Statx(rfd, "f", &st); return err }},
		{"getattr", "Lstat", func(t *testing.T) error { return Lstat(rfd, "f", &st) }},
		{"getattr", "Fstat", func(t *testing.T) error { return Fstat(pathOf(t, "f"), &st) }},
		{"mkdir", "Mkdir", func(t *testing.T) error { return Mkdir(rfd, "m", 0o755) }},
		{"rmdir", "Unlink (AT_REMOVEDIR)", func(t *testing.T) error { return Unlink(rfd, "m", unix.AT_REMOVEDIR) }},
		{"mknod", "Mknod", func(t *testing.T) error { return Mknod(rfd, "p", unix.S_IFIFO|0o644, 0) }},
		{"unlink", "Unlink", func(t *testing.T) error { return Unlink(rfd, "p", 0) }},
		{"symlink", "Symlink", func(t *testing.T) error { return Symlink("f", rfd, "s") }},
		{"readlink", "Readlink", func(t *testing.T) error { _, err := Readlink(pathOf(t, "l")); return err }},
		{"rename", "Rename", func(t *testing.T) error { return Rename(rfd, "s", rfd, "s2", 0) }},
		{"link", "Link", func(t *testing.T) error { return Link(pathOf(t, "f"), rfd, "f2") }},
		{"setattr", "Chmod", func(t *testing.T) error { return Chmod(pathOf(t, "f"), 0o600) }},
		{"setattr", "Chown", func(t *testing.T) error { return Chown(pathOf(t, "f"), 0, 0) }},
		{"setattr", "Utimens", func(t *testing.T) error {
			return Utimens(pathOf(t, "f"), []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}})
		}},
		{"setxattr", "Setxattr", func(t *testing.T) error { return Setxattr(pathOf(t, "f"), "user.x", []byte("1"), 0) }},
		{"getxattr", "Getxattr", func(t *testing.T) error { _, err := Getxattr(pathOf(t, "f"), "user.x", nil); return err }},
		{"setxattr", "Fsetxattr", func(t *testing.T) error { return Fsetxattr(openFile(t, unix.O_RDWR), "user.y", []byte("1")) }},
		{"getxattr", "Fgetxattr", func(t *testing.T) error { _, err := Fgetxattr(openFile(t, unix.O_RDONLY), "user.y"); return err }},
		{"listxattr", "Listxattr", func(t *testing.T) error { _, err := Listxattr(pathOf(t, "f"), nil); return err }},
		{"removexattr", "Removexattr", func(t *testing.T) error { return Removexattr(pathOf(t, "f"), "user.x") }},
		{"readdir", "ReadDir", func(t *testing.T) error { _, err := ReadDir(rfd); return err }},
		{"fsyncdir", "SyncDir", func(t *testing.T) error { return SyncDir(rfd) }},
		{"statfs", "Statfs", func(t *testing.T) error { return Statfs(rfd, &unix.Statfs_t{}) }},
		{"fsync", "Fsync", func(t *testing.T) error { return Fsync(openFile(t, unix.O_RDWR)) }},
		{"fsync", "Fdatasync", func(t *testing.T) error { return Fdatasync(openFile(t, unix.O_RDWR)) }},
		{"fallocate", "Fallocate", func(t *testing.T) error { return Fallocate(openFile(t, unix.O_RDWR), 0, 0, 8) }},
		{"copy", "CopySparse", func(t *testing.T) error {
			dst, err := Open(rfd, "copy", unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			defer Close(dst)
			return CopySparse(dst, openFile(t, unix.O_RDONLY), 4)
		}},
	} {
		t.Run(tc.call, func(t *testing.T) {
			efs.arm(tc.kind)
			err := tc.fn(t)
			if !efs.fired() {
				t.Skipf("no %s request reached the filesystem", tc.kind)
			}
			if err != nil {
				t.Errorf("%s after an EINTR: %v, want it tried again", tc.call, err)
			}
		})
	}
}
