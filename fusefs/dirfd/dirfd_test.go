package dirfd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree makes root/{a/b/file, link-out -> outside, chain1 -> chain2 -> outside,
// abs -> /etc, a/up -> ../..} with outside/secret beside root.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "a", "b"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(root, "a", "b", "file"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("SENTINEL"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(root, "link-out")))
	must(t, os.Symlink("chain2", filepath.Join(root, "chain1")))
	must(t, os.Symlink("../outside", filepath.Join(root, "chain2")))
	must(t, os.Symlink("/etc", filepath.Join(root, "abs")))
	must(t, os.Symlink("../..", filepath.Join(root, "a", "up")))
	return root, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openRoot(t *testing.T, root string) int {
	t.Helper()
	fd, err := OpenRoot(root)
	must(t, err)
	t.Cleanup(func() { Close(fd) })
	return fd
}

func readAll(t *testing.T, fd int) string {
	t.Helper()
	buf := make([]byte, 64)
	n, err := unix.Pread(fd, buf, 0)
	must(t, err)
	return string(buf[:n])
}

// walkBeneath opens rel beneath root as the node tree reaches it: one
// OpenDir per directory, each from the fd of the one before, and the last
// name opened with Open(flags), or OpenDir when flags has O_DIRECTORY.
// between, if set, runs before each step, so a test can swap objects
// between two. A test helper: production code never holds a path.
func walkBeneath(root int, rel string, flags int, between func(step int, name string)) (int, error) {
	names := strings.Split(rel, "/")
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for i, name := range names {
		if between != nil {
			between(i, name)
		}
		var next int
		switch {
		case i < len(names)-1 || flags&unix.O_DIRECTORY != 0:
			next, err = OpenDir(dir, name)
		default:
			next, err = Open(dir, name, flags, 0)
		}
		Close(dir)
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return dir, nil
}

// refused reports whether err is how the layer refuses a step that would
// leave the root or follow a link: ErrEscape, or ENOTDIR, which openat
// without openat2 answers for a symlink opened as a directory (the node
// tree treats it as an escape: Node.dirFd).
func refused(err error) bool {
	return errors.Is(err, ErrEscape) || errors.Is(err, unix.ENOTDIR)
}

// bothWays runs fn with openat2, and again on a thread where openat2 is
// missing (ENOSYS), as on kernels before 5.6.
func bothWays(t *testing.T, fn func(t *testing.T)) {
	t.Run("openat2", fn)
	t.Run("openat", func(t *testing.T) {
		withoutCalls(t, []uintptr{unix.SYS_OPENAT2}, func() { fn(t) })
	})
}

// TestWalkRefusesEscapes: reached one name at a time, no path leaves the
// root: not by "..", not through a symlink, relative, absolute or chained.
func TestWalkRefusesEscapes(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	tests := []struct {
		rel     string
		wantErr error // nil: must succeed; ErrEscape: must be refused
	}{
		{"a/b/file", nil},
		{"..", ErrEscape},
		{"a/../../outside/secret", ErrEscape},
		{"a/b/../../..", ErrEscape},
		{"link-out/secret", ErrEscape},
		{"chain1/secret", ErrEscape},
		{"abs/passwd", ErrEscape},
		{"a/up/outside/secret", ErrEscape},
		{"link-out", ErrEscape},
		{"nonexistent", unix.ENOENT},
	}
	bothWays(t, func(t *testing.T) {
		for _, tt := range tests {
			fd, err := walkBeneath(rfd, tt.rel, unix.O_RDONLY, nil)
			switch {
			case err == nil && tt.wantErr == nil:
				if got := readAll(t, fd); got != "inside" {
					t.Errorf("%q read %q", tt.rel, got)
				}
				Close(fd)
			case err == nil:
				got := readAll(t, fd)
				Close(fd)
				t.Errorf("%q succeeded (read %q), want %v", tt.rel, got, tt.wantErr)
			case tt.wantErr == nil:
				t.Errorf("%q: %v", tt.rel, err)
			case tt.wantErr == ErrEscape && !refused(err):
				t.Errorf("%q = %v, want ErrEscape", tt.rel, err)
			case tt.wantErr != ErrEscape && !errors.Is(err, tt.wantErr):
				t.Errorf("%q = %v, want %v", tt.rel, err, tt.wantErr)
			}
		}
	})
}

// TestMagicLinksRefused walks beneath /proc/self, where "root", "cwd",
// "exe" and "fd/N" are magic links: none may be crossed or opened.
func TestMagicLinksRefused(t *testing.T) {
	pfd := openRoot(t, "/proc/self")
	bothWays(t, func(t *testing.T) {
		for _, rel := range []string{"root/etc/passwd", "cwd", "fd/0", "exe"} {
			if fd, err := walkBeneath(pfd, rel, unix.O_RDONLY, nil); err == nil {
				Close(fd)
				t.Errorf("/proc/self/%s: crossed a magic link", rel)
			} else if !refused(err) {
				t.Errorf("/proc/self/%s = %v, want ErrEscape", rel, err)
			}
		}
	})
}

func TestSingleNameCallsRefuseBadNames(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	var st unix.Stat_t
	for _, name := range []string{"", ".", "..", "a/b", "/etc", "x\x00y"} {
		if _, err := OpenDir(rfd, name); !errors.Is(err, ErrEscape) {
			t.Errorf("OpenDir(%q) = %v, want ErrEscape", name, err)
		}
		if err := Lstat(rfd, name, &st); !errors.Is(err, ErrEscape) {
			t.Errorf("Lstat(%q) = %v, want ErrEscape", name, err)
		}
		if err := Mkdir(rfd, name, 0o755); !errors.Is(err, ErrEscape) {
			t.Errorf("Mkdir(%q) = %v, want ErrEscape", name, err)
		}
		if err := Unlink(rfd, name, 0); !errors.Is(err, ErrEscape) {
			t.Errorf("Unlink(%q) = %v, want ErrEscape", name, err)
		}
	}
}

func TestSymlinksAreNeverFollowed(t *testing.T) {
	root, outside := tree(t)
	rfd := openRoot(t, root)
	// Opening a symlink by name for data or as a directory fails.
	if _, err := Open(rfd, "link-out", unix.O_RDONLY, 0); err == nil {
		t.Error("Open(link-out) followed the symlink")
	}
	if _, err := OpenDir(rfd, "link-out"); err == nil {
		t.Error("OpenDir(link-out) followed the symlink")
	}
	// O_CREAT through a dangling-out symlink creates nothing outside.
	must(t, os.Symlink(filepath.Join(outside, "created"), filepath.Join(root, "dangling")))
	if fd, err := Open(rfd, "dangling", unix.O_WRONLY|unix.O_CREAT, 0o644); err == nil {
		Close(fd)
		t.Error("Open(dangling, O_CREAT) succeeded")
	}
	if _, err := os.Lstat(filepath.Join(outside, "created")); !os.IsNotExist(err) {
		t.Errorf("a file was created outside the root: %v", err)
	}
	// An O_PATH fd of the symlink itself is allowed and reads its target.
	fd, err := OpenPath(rfd, "link-out")
	must(t, err)
	defer Close(fd)
	target, err := Readlink(fd)
	must(t, err)
	if target != outside {
		t.Errorf("Readlink = %q, want %q", target, outside)
	}
	// Chmod on a symlink fd must not reach the target.
	before, _ := os.Stat(outside)
	if err := Chmod(fd, 0o700); err == nil {
		t.Error("Chmod on a symlink fd succeeded")
	}
	after, _ := os.Stat(outside)
	if before.Mode() != after.Mode() {
		t.Errorf("Chmod through a symlink changed the target: %v -> %v", before.Mode(), after.Mode())
	}
}

// TestSwapBetweenWalkSteps swaps a directory for a symlink to outside after
// the walk has opened its parent and before it opens the directory: the
// walk must fail rather than continue outside.
func TestSwapBetweenWalkSteps(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, outside := tree(t)
		rfd := openRoot(t, root)
		must(t, os.MkdirAll(filepath.Join(outside, "b"), 0o755))
		must(t, os.WriteFile(filepath.Join(outside, "b", "file"), []byte("SENTINEL"), 0o644))
		swap := func(step int, name string) {
			if name == "b" {
				a := filepath.Join(root, "a")
				must(t, os.Rename(filepath.Join(a, "b"), filepath.Join(a, "b.moved")))
				must(t, os.Symlink(filepath.Join(outside, "b"), filepath.Join(a, "b")))
			}
		}
		fd, err := walkBeneath(rfd, "a/b/file", unix.O_RDONLY, swap)
		if err == nil {
			got := readAll(t, fd)
			Close(fd)
			t.Fatalf("walk continued through the swapped-in symlink and read %q", got)
		}
		if !refused(err) {
			t.Errorf("err = %v, want ErrEscape", err)
		}
	})
}

// TestHeldDirFdSurvivesSwap: a directory fd taken before a swap keeps
// naming the original directory, which is what the node tree relies on.
func TestHeldDirFdSurvivesSwap(t *testing.T) {
	root, outside := tree(t)
	rfd := openRoot(t, root)
	afd, err := OpenDir(rfd, "a")
	must(t, err)
	defer Close(afd)
	must(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "a.moved")))
	must(t, os.Symlink(outside, filepath.Join(root, "a")))
	bfd, err := OpenDir(afd, "b")
	must(t, err)
	defer Close(bfd)
	fd, err := Open(bfd, "file", unix.O_RDONLY, 0)
	must(t, err)
	defer Close(fd)
	if got := readAll(t, fd); got != "inside" {
		t.Errorf("read %q through the held fd, want the original directory's file", got)
	}
	if strings.Contains(readAll(t, fd), "SENTINEL") {
		t.Error("sentinel served")
	}
}

func TestCreateIsExclusive(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	fd, err := Open(rfd, "new", unix.O_WRONLY|unix.O_CREAT, 0o600)
	must(t, err)
	Close(fd)
	if _, err := Open(rfd, "new", unix.O_WRONLY|unix.O_CREAT, 0o600); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second O_CREAT open = %v, want EEXIST (O_EXCL forced)", err)
	}
}

func TestLinkNamesTheHeldObject(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	bfd, err := walkBeneath(rfd, "a/b", unix.O_DIRECTORY, nil)
	must(t, err)
	defer Close(bfd)
	fd, err := OpenPath(bfd, "file")
	must(t, err)
	defer Close(fd)
	// Replace the name; the link must still be to the object we hold.
	must(t, os.Rename(filepath.Join(root, "a", "b", "file"), filepath.Join(root, "a", "b", "old")))
	must(t, os.WriteFile(filepath.Join(root, "a", "b", "file"), []byte("replacement"), 0o644))
	must(t, Link(fd, rfd, "linked"))
	got, err := os.ReadFile(filepath.Join(root, "linked"))
	must(t, err)
	if string(got) != "inside" {
		t.Errorf("link points at %q, want the held object", got)
	}
}

// TestStatxMatchesFstatat: Statx fills the same fields as fstatat, and its
// generation tells a reused inode number apart.
func TestStatxMatchesFstatat(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	afd, err := OpenDir(rfd, "a")
	must(t, err)
	defer Close(afd)
	bfd, err := OpenDir(afd, "b")
	must(t, err)
	defer Close(bfd)
	var want, got unix.Stat_t
	must(t, Lstat(bfd, "file", &want))
	gen, err := Statx(bfd, "file", &got)
	must(t, err)
	if got.Dev != want.Dev || got.Ino != want.Ino || got.Mode != want.Mode || got.Size != want.Size ||
		got.Nlink != want.Nlink || got.Mtim != want.Mtim || got.Ctim != want.Ctim || got.Uid != want.Uid {
		t.Errorf("Statx = %+v, fstatat = %+v", got, want)
	}
	var self unix.Stat_t
	if _, err := Statx(bfd, "", &self); err != nil || self.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Errorf(`Statx(dir, "") = %v, mode %o; want the directory itself`, err, self.Mode)
	}
	// Replace the file: if the inode number comes back, the generation
	// must differ (where the filesystem has birth times).
	must(t, Unlink(bfd, "file", 0))
	fd, err := Open(bfd, "file", unix.O_WRONLY|unix.O_CREAT, 0o644)
	must(t, err)
	Close(fd)
	gen2, err := Statx(bfd, "file", &got)
	must(t, err)
	if got.Ino == want.Ino && gen != 0 && gen2 == gen {
		t.Errorf("reused inode %d kept generation %d", got.Ino, gen)
	}
}

// The node tree keeps an O_PATH fd per directory it knows, so an operation
// costs one call on (parent fd, name). Without that cache every operation
// would walk from the root, one checked openat per level. These benchmarks
// measure both for a file six directories deep (docs/PERFORMANCE.md).
func benchTree(b *testing.B) (root int, parent int) {
	dir := b.TempDir()
	deep := filepath.Join(dir, "a", "b", "c", "d", "e", "f")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "file"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	parent, err = walkBeneath(root, "a/b/c/d/e/f", unix.O_DIRECTORY, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { Close(parent); Close(root) })
	return root, parent
}

func BenchmarkStatCachedParent(b *testing.B) {
	_, parent := benchTree(b)
	var st unix.Stat_t
	for b.Loop() {
		if err := Lstat(parent, "file", &st); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatWalkFromRoot(b *testing.B) {
	root, _ := benchTree(b)
	var st unix.Stat_t
	for b.Loop() {
		fd, err := walkBeneath(root, "a/b/c/d/e/f", unix.O_DIRECTORY, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := Lstat(fd, "file", &st); err != nil {
			b.Fatal(err)
		}
		Close(fd)
	}
}

func BenchmarkStatOpenat2FromRoot(b *testing.B) {
	root, _ := benchTree(b)
	var st unix.Stat_t
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags}
	for b.Loop() {
		fd, err := unix.Openat2(root, "a/b/c/d/e/f", how)
		if err != nil {
			b.Fatal(err)
		}
		if err := Lstat(fd, "file", &st); err != nil {
			b.Fatal(err)
		}
		Close(fd)
	}
}

// TestRelTo: a directory's path relative to the root, from the kernel's
// two paths; a path that merely starts with the root's name is not
// beneath it.
func TestRelTo(t *testing.T) {
	for _, c := range []struct {
		root, p, want string
		ok            bool
	}{
		{"/b", "/b", "", true},
		{"/b", "/b/m/.docker", "m/.docker", true},
		{"/b", "/backing/x", "", false},
		{"/b", "/c", "", false},
		{"/", "/", "", true},
		{"/", "/m/d", "m/d", true},
	} {
		if got, ok := relTo(c.root, c.p); got != c.want || ok != c.ok {
			t.Errorf("relTo(%q, %q) = %q, %v; want %q, %v", c.root, c.p, got, ok, c.want, c.ok)
		}
	}
}

// TestRootRelFollowsRename: Rel gives where a directory is now, after a
// rename its fd followed.
func TestRootRelFollowsRename(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "m", "d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(root)
	r, err := NewRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := OpenDir(root, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer Close(m)
	d, err := OpenDir(m, "d1")
	if err != nil {
		t.Fatal(err)
	}
	defer Close(d)
	for _, step := range []struct{ from, to, want string }{
		{"", "", "m/d1"},
		{"d1", ".docker", "m/.docker"},
	} {
		if step.from != "" {
			if err := Rename(m, step.from, m, step.to, 0); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := r.Rel(d); got != step.want || err != nil {
			t.Errorf("Rel = %q, %v; want %q", got, err, step.want)
		}
	}
	if got, err := r.Rel(root); got != "" || err != nil {
		t.Errorf("Rel of the root = %q, %v", got, err)
	}
}
