package dirfd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// bindTree is tree with two bind mounts from outside made inside it (as
// root): outside/ onto root/bm (a directory) and outside/secret onto
// root/a/innocent (a file). Both are on the same filesystem as the root,
// so st_dev cannot tell them apart.
func bindTree(t *testing.T) (root, outside string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	root, outside = tree(t)
	must(t, os.Mkdir(filepath.Join(root, "bm"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "a", "innocent"), []byte("innocent"), 0o644))
	for _, b := range [][2]string{{outside, filepath.Join(root, "bm")}, {filepath.Join(outside, "secret"), filepath.Join(root, "a", "innocent")}} {
		must(t, unix.Mount(b[0], b[1], "", unix.MS_BIND, ""))
		t.Cleanup(func() { unix.Unmount(b[1], unix.MNT_DETACH) })
	}
	return root, outside
}

// checkMountsRefused opens and stats the two bind mounts of bindTree and
// wants ErrEscape from each.
func checkMountsRefused(t *testing.T, rfd int) {
	t.Helper()
	if fd, err := OpenDir(rfd, "bm"); !errors.Is(err, ErrEscape) {
		Close(fd)
		t.Errorf("OpenDir of a bind mount: %v, want ErrEscape", err)
	}
	if fd, err := OpenPath(rfd, "bm"); !errors.Is(err, ErrEscape) {
		Close(fd)
		t.Errorf("OpenPath of a bind mount: %v, want ErrEscape", err)
	}
	a, err := OpenDir(rfd, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer Close(a)
	if fd, err := Open(a, "innocent", unix.O_RDONLY, 0); !errors.Is(err, ErrEscape) {
		if err == nil {
			t.Errorf("Open of a file bind mount read %q, want ErrEscape", readAll(t, fd))
		}
		Close(fd)
		t.Errorf("Open of a file bind mount: %v, want ErrEscape", err)
	}
	var st unix.Stat_t
	if _, err := Statx(rfd, "bm", &st); !errors.Is(err, ErrEscape) {
		t.Errorf("Statx of a bind-mounted directory: %v, want ErrEscape", err)
	}
	if _, err := Statx(a, "innocent", &st); !errors.Is(err, ErrEscape) {
		t.Errorf("Statx of a bind-mounted file: %v, want ErrEscape", err)
	}
	// What is not a mount point still opens.
	fd, err := Open(a, "b", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Errorf("Open of a plain directory beside the mounts: %v", err)
	}
	Close(fd)
	if _, err := Statx(a, "b", &st); err != nil {
		t.Errorf("Statx of a plain directory: %v", err)
	}
}

func TestMountsInsideAreRefused(t *testing.T) {
	root, _ := bindTree(t)
	checkMountsRefused(t, openRoot(t, root))
}

func TestMountsInsideAreRefusedWithoutOpenat2(t *testing.T) {
	root, _ := bindTree(t)
	rfd := openRoot(t, root)
	withoutCalls(t, []uintptr{unix.SYS_OPENAT2}, func() {
		checkMountsRefused(t, rfd)
		if !noOpenat2.Load() {
			t.Error("the fallback was not taken")
		}
	})
}

func TestRootHolds(t *testing.T) {
	root, outside := tree(t)
	r, rfd := newRoot(t, root)
	a, err := OpenDir(rfd, "a")
	must(t, err)
	defer Close(a)
	b, err := OpenDir(a, "b")
	must(t, err)
	defer Close(b)
	// Where says the same, and where: rel for a directory beneath.
	check := func(what string, fd int, want bool, wantRel string) {
		t.Helper()
		if got, err := r.Holds(fd); err != nil || got != want {
			t.Errorf("%s: Holds = %v, %v; want %v", what, got, err, want)
		}
		if rel, known, got, err := r.Where(fd); err != nil || got != want || known != want || rel != wantRel {
			t.Errorf("%s: Where = %q, %v, %v, %v; want %q, %v, %v", what, rel, known, got, err, wantRel, want, want)
		}
		if got, err := r.walkUp(fd); err != nil || got != want {
			t.Errorf("%s: walkUp = %v, %v; want %v", what, got, err, want)
		}
	}
	check("the root", rfd, true, "")
	check("a/b", b, true, "a/b")
	// Renamed inside: still beneath.
	must(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "a2")))
	check("a/b renamed to a2/b", b, true, "a2/b")
	// Moved out: no longer.
	must(t, os.Rename(filepath.Join(root, "a2"), filepath.Join(outside, "a")))
	check("a moved out of the root", a, false, "")
	check("a/b moved out with a", b, false, "")
	// A sibling whose name starts with the root's is not beneath it.
	sib := root + "-sibling"
	must(t, os.Rename(filepath.Join(outside, "a"), sib))
	check("a moved to root-sibling", a, false, "")
	must(t, os.Rename(sib, filepath.Join(root, "a")))
	check("a moved back", a, true, "a")
	// The root itself renamed: its path is read again.
	must(t, os.Rename(root, root+"-moved"))
	check("a/b after the root was renamed", b, true, "a/b")
	must(t, os.Rename(root+"-moved", root))
}

// newRoot opens root, and a Root of it (both closed at the test's end).
func newRoot(t *testing.T, root string) (*Root, int) {
	t.Helper()
	rfd := openRoot(t, root)
	r, err := NewRoot(rfd)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return r, rfd
}

// nest makes levels directories named name, each in the one before, from
// the directory held by from, and returns the deepest one's fd (closed at
// the test's end).
func nest(t *testing.T, from int, name string, levels int) int {
	t.Helper()
	dir, err := unix.Dup(from)
	must(t, err)
	for range levels {
		must(t, Mkdir(dir, name, 0o755))
		next, err := OpenDir(dir, name)
		must(t, err)
		Close(dir)
		dir = next
	}
	t.Cleanup(func() { Close(dir) })
	return dir
}

// TestRootWhereLong: a path longer than fdPath's first buffer is read
// whole (a second, larger read).
func TestRootWhereLong(t *testing.T) {
	root, _ := tree(t)
	r, rfd := newRoot(t, root)
	name := strings.Repeat("l", 200)
	dir := nest(t, rfd, name, 3) // 3 × 201 bytes: past the first 256
	want := strings.Join([]string{name, name, name}, "/")
	if got, known, ok, err := r.Where(dir); err != nil || !ok || !known || got != want {
		t.Errorf("Where = %d bytes %v %v %v; want the %d bytes of %q/...", len(got), known, ok, err, len(want), name[:8])
	}
}

// TestRootHoldsDeep: past PATH_MAX the kernel gives no path, and Holds
// walks up instead.
func TestRootHoldsDeep(t *testing.T) {
	root, outside := tree(t)
	r, rfd := newRoot(t, root)
	name := strings.Repeat("d", 200)
	dir := nest(t, rfd, name, 30) // 30 × 201 bytes > PATH_MAX
	if _, err := r.fdPath(dir); err != unix.ENAMETOOLONG {
		t.Fatalf("the kernel gave a path %d levels down: %v", 30, err)
	}
	if ok, err := r.Holds(dir); err != nil || !ok {
		t.Errorf("Holds deep inside: %v, %v; want true", ok, err)
	}
	if rel, known, ok, err := r.Where(dir); err != nil || !ok || known || rel != "" {
		t.Errorf("Where deep inside = %q, %v, %v, %v; want inside, the path not known", rel, known, ok, err)
	}
	must(t, unix.Renameat(rfd, name, unix.AT_FDCWD, filepath.Join(outside, "deep")))
	if ok, err := r.Holds(dir); err != nil || ok {
		t.Errorf("Holds deep, moved out: %v, %v; want false", ok, err)
	}
	must(t, unix.Renameat(unix.AT_FDCWD, filepath.Join(outside, "deep"), rfd, name))
}

// BenchmarkHolds is the cost of the ancestry check per use of a directory
// fd (one readlink of /proc/self/fd/N), beside one fstatat of a name in
// the same directory for scale.
func BenchmarkHolds(b *testing.B) {
	base := b.TempDir()
	deep := filepath.Join(base, "root", "a", "b", "c", "d", "e")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "f"), nil, 0o644)
	rfd, err := OpenRoot(filepath.Join(base, "root"))
	if err != nil {
		b.Fatal(err)
	}
	defer Close(rfd)
	r, err := NewRoot(rfd)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	fd, err := OpenRoot(deep)
	if err != nil {
		b.Fatal(err)
	}
	defer Close(fd)
	b.Run("Holds", func(b *testing.B) {
		for b.Loop() {
			if ok, err := r.Holds(fd); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("Lstat", func(b *testing.B) {
		var st unix.Stat_t
		for b.Loop() {
			if err := Lstat(fd, "f", &st); err != nil {
				b.Fatal(err)
			}
		}
	})
}
