package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// deepName is a 255-byte name, the longest a component may be on ext4.
func deepName(i int) string {
	p := fmt.Sprintf("d%03d-", i)
	return p + strings.Repeat("x", 255-len(p))
}

// deepChain builds a chain of depth directories of 255-byte names under root
// by walking with openat/mkdirat (never a long path string), writes a file at
// the bottom, reads it back, renames it, then removes everything bottom-up.
// It returns a transcript of every step's outcome and the path length
// reached.
func deepChain(root string, depth int) ([]string, int) {
	var log []string
	note := func(step string, err error) bool {
		log = append(log, fmt.Sprintf("%s: %s", step, errnoName(errnoOf(err))))
		return err == nil
	}
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if !note("open root", err) {
		return log, 0
	}
	fds := []int{fd}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	length := len(root)
	for i := range depth {
		name := deepName(i)
		parent := fds[len(fds)-1]
		if !note(fmt.Sprintf("mkdirat %d", i), unix.Mkdirat(parent, name, 0o755)) {
			return log, length
		}
		child, err := unix.Openat(parent, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if !note(fmt.Sprintf("openat %d", i), err) {
			return log, length
		}
		fds = append(fds, child)
		length += 1 + len(name)
	}
	bottom := fds[len(fds)-1]
	f, err := unix.Openat(bottom, "file", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if note("create bottom file", err) {
		_, err = unix.Write(f, []byte("at the bottom"))
		note("write", err)
		note("close", unix.Close(f))
	}
	f, err = unix.Openat(bottom, "file", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if note("reopen", err) {
		buf := make([]byte, 64)
		n, err := unix.Read(f, buf)
		if err == nil && string(buf[:n]) != "at the bottom" {
			err = fmt.Errorf("read %q", buf[:n])
		}
		note("read", err)
		unix.Close(f)
	}
	var st unix.Stat_t
	note("fstatat", unix.Fstatat(bottom, "file", &st, unix.AT_SYMLINK_NOFOLLOW))
	log = append(log, fmt.Sprintf("size %d nlink %d", st.Size, st.Nlink))
	note("renameat", unix.Renameat(bottom, "file", fds[len(fds)-2], "moved-up"))
	note("symlinkat", unix.Symlinkat("moved-up", fds[len(fds)-2], "link"))
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(fds[len(fds)-2], "link", buf)
	note("readlinkat "+string(buf[:max(n, 0)]), err)
	// A path string longer than PATH_MAX is refused by the kernel on both.
	var lst unix.Stat_t
	long := root
	for i := range depth {
		long += "/" + deepName(i)
	}
	log = append(log, "lstat long path: "+errnoName(errnoOf(unix.Lstat(long, &lst))))
	note("unlink link", unix.Unlinkat(fds[len(fds)-2], "link", 0))
	note("unlink moved-up", unix.Unlinkat(fds[len(fds)-2], "moved-up", 0))
	for i := depth - 1; i >= 0; i-- {
		note(fmt.Sprintf("rmdir %d", i), unix.Unlinkat(fds[i], deepName(i), unix.AT_REMOVEDIR))
	}
	return log, length
}

// TestDeepPath: a directory chain deeper than 4,096 bytes behaves through the
// mount exactly as on a native directory.
func TestDeepPath(t *testing.T) {
	t.Parallel()
	m := mount(t)
	const depth = 20 // 20 × 256 bytes > PATH_MAX
	native := t.TempDir()
	want, nlen := deepChain(native, depth)
	got, mlen := deepChain(m.Dir, depth)
	if nlen-len(native) <= unix.PathMax || mlen-len(m.Dir) <= unix.PathMax {
		t.Fatalf("chains reached only %d and %d bytes, want > %d", nlen-len(native), mlen-len(m.Dir), unix.PathMax)
	}
	for _, line := range want {
		if strings.Contains(line, ": ") && !strings.HasSuffix(line, ": none") && !strings.HasPrefix(line, "lstat long path") {
			t.Errorf("native step failed: %s", line)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("deep chain differs through the mount:\nmount:  %q\nnative: %q", got, want)
	}
	if got, want := lastLine(got, "lstat long path"), "lstat long path: ENAMETOOLONG"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
	// Everything was removed, in BACKING too.
	assertOnlyNames(t, m.Backing)
}

func lastLine(lines []string, prefix string) string {
	for _, l := range slices.Backward(lines) {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestDeepPathVisibleInBacking: a deep chain made through the mount exists in
// BACKING with the same names and content.
func TestDeepPathVisibleInBacking(t *testing.T) {
	t.Parallel()
	m := mount(t)
	const depth = 18
	walk := func(root string, create bool) (int, error) {
		fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		for i := range depth {
			if create {
				if err := unix.Mkdirat(fd, deepName(i), 0o755); err != nil {
					unix.Close(fd)
					return -1, err
				}
			}
			next, err := unix.Openat(fd, deepName(i), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			fd = next
		}
		return fd, nil
	}
	fd, err := walk(m.Dir, true)
	if err != nil {
		t.Fatalf("walking down through the mount: %v", err)
	}
	f, err := unix.Openat(fd, "file", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(f, []byte("deep")); err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	unix.Close(fd)
	bfd, err := walk(m.Backing, false)
	if err != nil {
		t.Fatalf("walking down BACKING: %v", err)
	}
	defer unix.Close(bfd)
	f, err = unix.Openat(bfd, "file", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("bottom file in BACKING: %v", err)
	}
	defer unix.Close(f)
	buf := make([]byte, 16)
	n, _ := unix.Read(f, buf)
	if string(buf[:n]) != "deep" {
		t.Errorf("bottom file in BACKING = %q", buf[:n])
	}
	// rm -r through the mount copes with the depth too.
	run(t, m.Dir, nil, "rm", "-r", deepName(0))
	assertOnlyNames(t, m.Backing)
}

// TestOwnershipAndPermissions: as root with allow_other,default_permissions,
// objects created by uid 65534 are owned by 65534, and 65534 is refused a
// root-owned 0600 file.
func TestOwnershipAndPermissions(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("allow_other", "default_permissions"))
	if err := os.Mkdir(m.Path("pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m.Path("pub"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.Path("secret"), []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m.Path("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path("rootfile"), "root")
	p := m.Path
	ops := []struct{ op, want string }{
		{"write:" + p("pub/f") + ":by nobody", "ok"},
		{"mkdir:" + p("pub/d"), "ok"},
		{"symlink:" + p("pub/l") + ":f", "ok"},
		{"mkfifo:" + p("pub/p"), "ok"},
		{"stat:" + p("pub/f"), "ok 65534 65534 100644"},
		{"read:" + p("pub/f"), "ok by nobody"},
		{"read:" + p("secret"), "err EACCES"},
		{"write:" + p("secret") + ":x", "err EACCES"},
		{"append:" + p("rootfile") + ":x", "err EACCES"},
		{"mkdir:" + p("notpub"), "err EACCES"},
		{"unlink:" + p("rootfile"), "err EACCES"},
		{"chmod:" + p("secret") + ":644", "err EPERM"},
		{"read:" + p("rootfile"), "ok root"},
	}
	var args []string
	for _, o := range ops {
		args = append(args, o.op)
	}
	got := probe(t, asNobody, args...)
	for i, o := range ops {
		if got[i] != o.want {
			t.Errorf("as uid 65534: %s = %q, want %q", o.op, got[i], o.want)
		}
	}
	for _, name := range []string{"pub/f", "pub/d", "pub/l", "pub/p"} {
		if st := lstat(t, m.BackingPath(name)); st.Uid != nobody || st.Gid != nobody {
			t.Errorf("BACKING %s owned by %d:%d, want 65534:65534", name, st.Uid, st.Gid)
		}
	}
	if st := lstat(t, m.BackingPath("secret")); st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("BACKING secret: uid %d mode %o", st.Uid, st.Mode&0o777)
	}
	if got := readFile(t, m.BackingPath("secret")); got != "root only" {
		t.Errorf("secret = %q", got)
	}
	assertAbsent(t, m.BackingPath("notpub"))
}

// TestLinkCounts: st_nlink is right after link, rename and unlink, through
// the mount and in agreement with BACKING, for files and directories.
func TestLinkCounts(t *testing.T) {
	t.Parallel()
	m := mount(t)
	type want struct {
		path  string
		nlink uint64
	}
	check := func(step string, wants ...want) {
		t.Helper()
		for _, w := range wants {
			if st := lstat(t, m.Path(w.path)); st.Nlink != w.nlink {
				t.Errorf("after %s: nlink of %s = %d through the mount, want %d", step, w.path, st.Nlink, w.nlink)
			}
			// BACKING's st_nlink counts the journal's kept links too.
			if n := m.backingLinks(t, m.BackingPath(w.path)); n != w.nlink {
				t.Errorf("after %s: nlink of %s = %d in BACKING (its kept links not counted), want %d", step, w.path, n, w.nlink)
			}
		}
	}
	writeFile(t, m.Path("f"), "x")
	if err := os.Mkdir(m.Path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("create", want{"f", 1}, want{"sub", 2})
	if err := os.Link(m.Path("f"), m.Path("g")); err != nil {
		t.Fatal(err)
	}
	check("link", want{"f", 2}, want{"g", 2})
	if err := os.Link(m.Path("g"), m.Path("sub/h")); err != nil {
		t.Fatal(err)
	}
	check("second link", want{"f", 3}, want{"g", 3}, want{"sub/h", 3})
	if err := os.Rename(m.Path("g"), m.Path("sub/g2")); err != nil {
		t.Fatal(err)
	}
	check("rename", want{"f", 3}, want{"sub/g2", 3}, want{"sub/h", 3})
	if err := os.Remove(m.Path("f")); err != nil {
		t.Fatal(err)
	}
	check("unlink", want{"sub/g2", 2}, want{"sub/h", 2})
	// Rename over another name of the same inode is a no-op (rename(2)).
	if err := os.Rename(m.Path("sub/g2"), m.Path("sub/h")); err != nil {
		t.Fatal(err)
	}
	check("rename onto a hard link of itself", want{"sub/g2", 2}, want{"sub/h", 2})
	if err := os.Mkdir(m.Path("sub/child"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("mkdir", want{"sub", 3}, want{"sub/child", 2})
	if err := os.Rename(m.Path("sub/child"), m.Path("child")); err != nil {
		t.Fatal(err)
	}
	check("rename of a dir", want{"sub", 2}, want{".", 4})
	if err := os.Remove(m.Path("child")); err != nil {
		t.Fatal(err)
	}
	check("rmdir", want{".", 3})
	// An open file unlinked through its last name has nlink 0 on fstat.
	f, err := os.Open(m.Path("sub/h"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"sub/h", "sub/g2"} {
		if err := os.Remove(m.Path(name)); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 {
		t.Errorf("fstat of an unlinked open file: nlink %d, want 0", st.Nlink)
	}
}

// direntInos lists the d_ino of every entry of dir (getdents64).
func direntInos(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	out := map[string]uint64{}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			ino := binary.NativeEndian.Uint64(b[0:8])
			reclen := binary.NativeEndian.Uint16(b[16:18])
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			out[string(name)] = ino
			b = b[reclen:]
		}
	}
}

// TestInodeNumbers: st_ino and d_ino through the mount are the backing
// files' for everything the mount has not rewritten. A file written through
// the mount is replaced by its temp (a new backing inode) at each commit;
// it keeps the inode number the kernel first knew it by, so that a program
// comparing fstat of its descriptor with stat of the path (SQLite does)
// sees one file. Hard links share their number.
func TestInodeNumbers(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("pre/file"), "before the mount")
		writeFile(t, m.BackingPath("pre/file2"), "before the mount")
	}))
	// Objects made before any file is rewritten: a commit frees an inode
	// number the backing filesystem may give to the next new object, and
	// while the rewritten file's node still answers to that number the new
	// object gets a number of the mount's own (unique, checked below).
	if err := os.Mkdir(m.Path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", m.Path("link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(m.Path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(m.Path("pre/file2"), m.Path("hard")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path("file"), "x")
	for i := range 20 { // rewrites and new files after them
		writeFile(t, m.Path(fmt.Sprintf("new%02d", i)), "y")
		writeFile(t, m.Path("file"), fmt.Sprintf("x%d", i))
	}
	seen := map[uint64]string{}
	for _, name := range []string{"dir", "link", "fifo", "pre", "pre/file", "pre/file2", "file"} {
		ino := lstat(t, m.Path(name)).Ino
		if other, dup := seen[ino]; dup {
			t.Errorf("%s and %s share st_ino %d through the mount", name, other, ino)
		}
		seen[ino] = name
	}
	for i := range 20 {
		name := fmt.Sprintf("new%02d", i)
		ino := lstat(t, m.Path(name)).Ino
		if other, dup := seen[ino]; dup {
			t.Errorf("%s and %s share st_ino %d through the mount", name, other, ino)
		}
		seen[ino] = name
	}
	names := []string{"dir", "link", "fifo", "pre", "pre/file", "pre/file2", "hard"}
	for _, name := range names {
		mi, bi := lstat(t, m.Path(name)).Ino, lstat(t, m.BackingPath(name)).Ino
		if mi != bi {
			t.Errorf("%s: st_ino %d through the mount, %d in BACKING", name, mi, bi)
		}
	}
	if lstat(t, m.Path("hard")).Ino != lstat(t, m.Path("pre/file2")).Ino {
		t.Errorf("hard links have different st_ino through the mount")
	}
	viaMount, inBacking := direntInos(t, m.Dir), direntInos(t, m.Backing)
	for _, name := range []string{"dir", "link", "fifo", "pre", "hard"} {
		if viaMount[name] != inBacking[name] {
			t.Errorf("%s: d_ino %d through the mount, %d in BACKING", name, viaMount[name], inBacking[name])
		}
	}
	// Rewriting keeps the number on the mount, for the descriptor and the path.
	before := lstat(t, m.Path("pre/file")).Ino
	f, err := os.OpenFile(m.Path("pre/file"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 3 {
		if _, err := f.WriteAt([]byte(fmt.Sprintf("rewrite %d", i)), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		var fst unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &fst); err != nil {
			t.Fatal(err)
		}
		if path := lstat(t, m.Path("pre/file")).Ino; fst.Ino != before || path != before {
			t.Errorf("after commit %d: st_ino %d (fd) and %d (path), want %d as before", i, fst.Ino, path, before)
		}
	}
}

// TestInodeNumbersAfterForget: a file the mount rewrote (a new backing
// inode at each commit) keeps the number the kernel knew it by after the
// kernel forgets its node (drop_caches), as a native file keeps its number
// for its life: git's index records st_ino, and a number that changed had
// git read every such file again. A file made through the mount keeps its
// number too, and no two files share one.
func TestInodeNumbersAfterForget(t *testing.T) {
	t.Parallel()
	const files = 30
	m := mount(t, Prepare(func(m *Mount) {
		for i := range files {
			writeFile(t, m.BackingPath(fmt.Sprintf("d/old%02d", i)), "before the mount")
		}
	}))
	names := make([]string, 0, 2*files)
	for i := range files {
		old, made := fmt.Sprintf("d/old%02d", i), fmt.Sprintf("d/new%02d", i)
		writeFile(t, m.Path(old), "rewritten through the mount")
		writeFile(t, m.Path(made), "made through the mount")
		writeFile(t, m.Path(made), "and rewritten")
		names = append(names, old, made)
	}
	before := map[string]uint64{}
	for _, name := range names {
		before[name] = lstat(t, m.Path(name)).Ino
	}
	rekeyed := 0
	for _, name := range names {
		if before[name] != lstat(t, m.BackingPath(name)).Ino {
			rekeyed++
		}
	}
	if rekeyed == 0 {
		t.Fatal("no file's number on the mount differs from its backing inode's: nothing to forget")
	}
	dropCaches(t)
	seen := map[uint64]string{}
	for _, name := range names {
		ino := lstat(t, m.Path(name)).Ino
		if ino != before[name] {
			t.Errorf("%s: st_ino %d after the kernel forgot it, %d before", name, ino, before[name])
		}
		if other, dup := seen[ino]; dup {
			t.Errorf("%s and %s share st_ino %d", name, other, ino)
		}
		seen[ino] = name
	}
	t.Logf("%d of %d files answer to a number not their backing inode's", rekeyed, len(names))
}

// TestEscapingSymlinks: symlinks in BACKING that leave the root are refused
// (EACCES on readlink and on open through them) and audited as PATH_ESCAPE;
// inside symlinks work.
func TestEscapingSymlinks(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, filepath.Join(m.Outside, "sentinel"), "SENTINEL outside BACKING")
		writeFile(t, m.BackingPath("top"), "top inside")
		writeFile(t, m.BackingPath("sub/f"), "f inside")
		for link, target := range map[string]string{
			"esc-rel":       "../outside/sentinel",
			"esc-dir":       "../outside",
			"esc-abs":       "/etc/passwd",
			"esc-abs-in":    m.BackingPath("top"), // absolute, even if it names BACKING
			"sub/esc-deep":  "../../outside/sentinel",
			"sub/esc-dots":  "../sub/../../outside/sentinel",
			"in-rel":        "sub/f",
			"sub/in-up":     "../top",
			"sub/in-dotdot": "../sub/./f",
		} {
			if err := os.Symlink(target, m.BackingPath(link)); err != nil {
				t.Fatal(err)
			}
		}
	}))
	for _, tc := range []struct {
		link, target, content string // target "" means refused
	}{
		{"esc-rel", "", ""},
		{"esc-dir", "", ""},
		{"esc-abs", "", ""},
		{"esc-abs-in", "", ""},
		{"sub/esc-deep", "", ""},
		{"sub/esc-dots", "", ""},
		{"in-rel", "sub/f", "f inside"},
		{"sub/in-up", "../top", "top inside"},
		{"sub/in-dotdot", "../sub/./f", "f inside"},
	} {
		target, err := os.Readlink(m.Path(tc.link))
		data, rerr := os.ReadFile(m.Path(tc.link))
		if tc.target == "" {
			wantErrno(t, err, unix.EACCES, "readlink "+tc.link)
			if target != "" {
				t.Errorf("readlink %s revealed %q", tc.link, target)
			}
			if rerr == nil || bytes.Contains(data, []byte("SENTINEL")) || bytes.Contains(data, []byte("root:")) {
				t.Errorf("open through %s: %q, %v; want EACCES", tc.link, data, rerr)
			}
			if rerr != nil && errnoOf(rerr) != unix.EACCES {
				t.Errorf("open through %s: %v, want EACCES", tc.link, rerr)
			}
			continue
		}
		if err != nil || target != tc.target {
			t.Errorf("readlink %s = %q, %v; want %q", tc.link, target, err, tc.target)
		}
		if rerr != nil || string(data) != tc.content {
			t.Errorf("read through %s = %q, %v; want %q", tc.link, data, rerr, tc.content)
		}
	}
	// Listing through the escaping directory symlink is refused too.
	_, err := os.ReadDir(m.Path("esc-dir") + "/")
	wantErrno(t, err, unix.EACCES, "readdir through esc-dir/")
	for _, link := range []string{"esc-rel", "esc-abs", "sub/esc-deep"} {
		e := m.WaitAudit("PATH_ESCAPE on "+link, func(e auditEntry) bool {
			return e.str("code") == "PATH_ESCAPE" && e.path() == link
		})
		checkAuditFields(t, e)
		if !e.errnoIs(unix.EACCES) {
			t.Errorf("audit entry for %s: errno %v, want EACCES (13)", link, e["errno"])
		}
	}
}

// TestSymlinkCreation: symlink(2) with an absolute, root-leaving or
// not normal target (a ".." after a name, which climbs from wherever that
// name resolves: TestSymlinkChainEscape) is refused with EACCES and
// creates nothing; normal inside targets work.
func TestSymlinkCreation(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("top"), "top")
		writeFile(t, m.BackingPath("sub/f"), "f")
	}))
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{"abs", "/etc/passwd", false},
		{"abs-root", "/", false},
		{"abs-backing", m.BackingPath("top"), false},
		{"up", "..", false},
		{"up-outside", "../outside", false},
		{"sub/up2", "../../x", false},
		{"dots", "sub/../../x", false},
		{"deep-dots", "sub/./../sub/../../top", false},
		{"in", "top", true},
		{"in-sub", "sub/f", true},
		{"sub/in-up", "../top", true},
		{"in-dots", "sub/../top", false}, // reads as top; were sub a link, it would not be
		{"sub/in-up2", "../sub/f", true},
		{"dangling-in", "no/such/file", true},
	} {
		err := unix.Symlink(tc.target, m.Path(tc.name))
		if !tc.ok {
			wantErrno(t, err, unix.EACCES, fmt.Sprintf("symlink %s -> %s", tc.name, tc.target))
			assertAbsent(t, m.BackingPath(tc.name))
			continue
		}
		if err != nil {
			t.Errorf("symlink %s -> %s: %v", tc.name, tc.target, err)
			continue
		}
		if got, err := os.Readlink(m.BackingPath(tc.name)); err != nil || got != tc.target {
			t.Errorf("BACKING %s -> %q, %v; want %q", tc.name, got, err, tc.target)
		}
	}
	if got := readFile(t, m.Path("sub/in-up")); got != "top" {
		t.Errorf("read through sub/in-up = %q", got)
	}
	// ln -s, the program, is refused the same way.
	if out, err := runErr(t, m.Dir, nil, "ln", "-s", "/etc/shadow", "via-ln"); err == nil {
		t.Errorf("ln -s /etc/shadow succeeded: %s", out)
	}
	assertAbsent(t, m.BackingPath("via-ln"))
	e := m.WaitAudit("PATH_ESCAPE for symlink abs", func(e auditEntry) bool {
		return e.str("code") == "PATH_ESCAPE" && e.path() == "abs"
	})
	checkAuditFields(t, e)
}

// TestMknod: fifos and sockets can be made; device nodes are refused EPERM.
func TestMknod(t *testing.T) {
	t.Parallel()
	m := mount(t)
	if err := unix.Mkfifo(m.Path("fifo"), 0o640); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, p := range []string{m.Path("fifo"), m.BackingPath("fifo")} {
		if st := lstat(t, p); st.Mode&unix.S_IFMT != unix.S_IFIFO {
			t.Errorf("%s: mode %o, want a fifo", p, st.Mode)
		}
	}
	// The fifo works as a fifo through the mount.
	done := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(m.Path("fifo"))
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- string(b)
	}()
	if err := os.WriteFile(m.Path("fifo"), []byte("through the pipe"), 0); err != nil {
		t.Fatalf("writing the fifo: %v", err)
	}
	if got := <-done; got != "through the pipe" {
		t.Errorf("fifo read %q", got)
	}

	if err := unix.Mknod(m.Path("sock"), unix.S_IFSOCK|0o644, 0); err != nil {
		t.Errorf("mknod S_IFSOCK: %v", err)
	} else if st := lstat(t, m.BackingPath("sock")); st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Errorf("BACKING sock: mode %o", st.Mode)
	}
	// bind(2) makes a socket through the mount; connect through it works.
	l, err := net.Listen("unix", m.Path("listen.sock"))
	if err != nil {
		t.Errorf("bind a unix socket in the mount: %v", err)
	} else {
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("hi"))
				c.Close()
			}
		}()
		c, err := net.Dial("unix", m.Path("listen.sock"))
		if err != nil {
			t.Errorf("connect to the socket through the mount: %v", err)
		} else {
			b, _ := io.ReadAll(c)
			c.Close()
			if string(b) != "hi" {
				t.Errorf("socket read %q", b)
			}
		}
	}

	for _, tc := range []struct {
		name string
		mode uint32
	}{
		{"null", unix.S_IFCHR | 0o666},
		{"block", unix.S_IFBLK | 0o600},
	} {
		err := unix.Mknod(m.Path(tc.name), tc.mode, int(unix.Mkdev(1, 3)))
		wantErrno(t, err, unix.EPERM, "mknod "+tc.name)
		assertAbsent(t, m.BackingPath(tc.name))
	}
	// mknod(1), the program, too.
	if out, err := runErr(t, m.Dir, nil, "mknod", "zero", "c", "1", "5"); err == nil {
		t.Errorf("mknod zero c 1 5 succeeded: %s", out)
	}
	assertAbsent(t, m.BackingPath("zero"))
}

// TestXattrs: user.* xattrs set, get, list and remove, on files and dirs.
func TestXattrs(t *testing.T) {
	t.Parallel()
	m := mount(t)
	writeFile(t, m.Path("f"), "x")
	if err := os.Mkdir(m.Path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "d"} {
		p := m.Path(name)
		if err := unix.Setxattr(p, "user.realm", []byte("value one"), 0); err != nil {
			t.Fatalf("setxattr %s: %v", name, err)
		}
		wantErrno(t, unix.Setxattr(p, "user.realm", []byte("v"), unix.XATTR_CREATE), unix.EEXIST, "XATTR_CREATE of an existing name")
		wantErrno(t, unix.Setxattr(p, "user.missing", []byte("v"), unix.XATTR_REPLACE), unix.ENODATA, "XATTR_REPLACE of a missing name")
		if err := unix.Setxattr(p, "user.second", []byte{}, 0); err != nil {
			t.Fatalf("setxattr empty value: %v", err)
		}
		buf := make([]byte, 256)
		n, err := unix.Getxattr(p, "user.realm", buf)
		if err != nil || string(buf[:n]) != "value one" {
			t.Errorf("getxattr %s = %q, %v", name, buf[:max(n, 0)], err)
		}
		if n, err := unix.Getxattr(p, "user.realm", nil); err != nil || n != len("value one") {
			t.Errorf("getxattr size query %s = %d, %v", name, n, err)
		}
		wantErrno(t, func() error { _, err := unix.Getxattr(p, "user.realm", make([]byte, 2)); return err }(), unix.ERANGE, "getxattr into a short buffer")
		n, err = unix.Getxattr(m.BackingPath(name), "user.realm", buf)
		if err != nil || string(buf[:n]) != "value one" {
			t.Errorf("getxattr in BACKING %s = %q, %v", name, buf[:max(n, 0)], err)
		}
		n, err = unix.Listxattr(p, buf)
		if err != nil {
			t.Fatal(err)
		}
		list := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
		if !slices.Contains(list, "user.realm") || !slices.Contains(list, "user.second") {
			t.Errorf("listxattr %s = %q", name, list)
		}
		if err := unix.Removexattr(p, "user.realm"); err != nil {
			t.Errorf("removexattr: %v", err)
		}
		_, err = unix.Getxattr(p, "user.realm", buf)
		wantErrno(t, err, unix.ENODATA, "getxattr after removexattr")
		_, err = unix.Getxattr(m.BackingPath(name), "user.realm", buf)
		wantErrno(t, err, unix.ENODATA, "getxattr in BACKING after removexattr")
		wantErrno(t, unix.Removexattr(p, "user.realm"), unix.ENODATA, "removexattr of a missing name")
	}
}

// TestFallocate: mode 0 extends, KEEP_SIZE allocates without growing,
// PUNCH_HOLE deallocates; compared with BACKING.
func TestFallocate(t *testing.T) {
	t.Parallel()
	m := mount(t)
	f, err := os.OpenFile(m.Path("f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	const mib = 1 << 20
	if err := unix.Fallocate(fd, 0, 0, mib); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != mib || st.Blocks*512 < mib {
		t.Errorf("after fallocate 1 MiB: size %d blocks %d, %v", st.Size, st.Blocks, err)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, mib, mib); err != nil {
		t.Fatalf("fallocate KEEP_SIZE: %v", err)
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Size != mib || st.Blocks*512 < 2*mib {
		t.Errorf("after KEEP_SIZE: size %d blocks %d, %v; want size 1 MiB, 2 MiB allocated", st.Size, st.Blocks, err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{'a'}, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 32<<10); err != nil {
		t.Fatalf("punch hole: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, m.Path("f"))
	if len(data) != mib || strings.Trim(data[:32<<10], "\x00") != "" || strings.Trim(data[32<<10:64<<10], "a") != "" {
		t.Errorf("content after fallocate and punch: %d bytes, wrong pattern", len(data))
	}
	bst := lstat(t, m.BackingPath("f"))
	if bst.Size != mib {
		t.Errorf("BACKING size %d, want %d", bst.Size, mib)
	}
}

// TestSeekDataHole: SEEK_DATA and SEEK_HOLE through the mount give what they
// give on the backing file, for a sparse file made before the mount and one
// made through it.
func TestSeekDataHole(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	makeSparse := func(path string) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range []int64{0, mib, 3 * mib} {
			if _, err := f.WriteAt(bytes.Repeat([]byte{'d'}, 4096), off); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Truncate(4 * mib); err != nil {
			t.Fatal(err)
		}
	}
	m := mount(t, Prepare(func(m *Mount) { makeSparse(m.BackingPath("pre")) }))
	makeSparse(m.Path("through"))
	type probe struct {
		whence int
		off    int64
	}
	probes := []probe{
		{unix.SEEK_HOLE, 0}, {unix.SEEK_DATA, 4096}, {unix.SEEK_HOLE, mib},
		{unix.SEEK_DATA, mib + 4096}, {unix.SEEK_HOLE, 3 * mib}, {unix.SEEK_DATA, 3*mib + 4096},
		{unix.SEEK_DATA, 4 * mib}, {unix.SEEK_HOLE, 4*mib - 1},
	}
	seeks := func(path string) []string {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out []string
		for _, p := range probes {
			off, err := unix.Seek(int(f.Fd()), p.off, p.whence)
			out = append(out, fmt.Sprintf("%d@%d=%d/%s", p.whence, p.off, off, errnoName(errnoOf(err))))
		}
		return out
	}
	for _, name := range []string{"pre", "through"} {
		want := seeks(m.BackingPath(name))
		if want[0] != fmt.Sprintf("%d@0=4096/none", unix.SEEK_HOLE) {
			t.Fatalf("BACKING %s is not sparse (%s); the backing filesystem lacks holes", name, want[0])
		}
		if got := seeks(m.Path(name)); !slices.Equal(got, want) {
			t.Errorf("%s: lseek through the mount %q, in BACKING %q", name, got, want)
		}
	}
}

// TestLocksBetweenProcesses: flock, POSIX and OFD locks taken by one process
// through the mount conflict with another process through the mount, and a
// blocked F_SETLKW / flock waiter is granted once the holder lets go.
func TestLocksBetweenProcesses(t *testing.T) {
	m := mount(t)
	for _, kind := range []string{"flock", "posix", "ofd"} {
		t.Run(kind, func(t *testing.T) {
			path := m.Path("lock-" + kind)
			writeFile(t, path, "locked file")
			holder := holdLock(t, kind, path)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd := f.Fd()
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
			try := func(cmd int) error {
				switch kind {
				case "flock":
					if cmd == unix.F_SETLKW {
						return unix.Flock(int(fd), unix.LOCK_EX)
					}
					return unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
				case "ofd":
					cmd = map[int]int{unix.F_SETLK: unix.F_OFD_SETLK, unix.F_SETLKW: unix.F_OFD_SETLKW, unix.F_GETLK: unix.F_OFD_GETLK}[cmd]
				}
				l := lk
				return unix.FcntlFlock(fd, cmd, &l)
			}
			err = try(unix.F_SETLK)
			if e := errnoOf(err); e != unix.EAGAIN && e != unix.EACCES {
				t.Errorf("%s lock while another process holds it: %v, want EAGAIN", kind, err)
			}
			if kind != "flock" {
				get := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
				cmd := unix.F_GETLK
				if kind == "ofd" {
					cmd = unix.F_OFD_GETLK
				}
				if err := unix.FcntlFlock(fd, cmd, &get); err != nil || get.Type != unix.F_WRLCK {
					t.Errorf("F_GETLK: type %d, %v; want the holder's F_WRLCK", get.Type, err)
				}
			}
			var released atomic.Bool
			granted := make(chan error, 1)
			tids := make(chan int, 1)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				tids <- unix.Gettid()
				err := try(unix.F_SETLKW)
				if err == nil && !released.Load() {
					err = fmt.Errorf("blocking %s lock granted while the other process held it", kind)
				}
				granted <- err
			}()
			waitInFuse(t, <-tids, "the blocking "+kind+" waiter")
			released.Store(true)
			holder.Release(t)
			if err := <-granted; err != nil {
				t.Errorf("blocking lock after release: %v", err)
			}
		})
	}
}

// TestStatfs: statfs through the mount reports BACKING's filesystem.
func TestStatfs(t *testing.T) {
	t.Parallel()
	m := mount(t)
	var ms, bs unix.Statfs_t
	if err := unix.Statfs(m.Dir, &ms); err != nil {
		t.Fatalf("statfs through the mount: %v", err)
	}
	if err := unix.Statfs(m.Backing, &bs); err != nil {
		t.Fatal(err)
	}
	const fuseSuperMagic = 0x65735546
	if ms.Type != fuseSuperMagic {
		t.Errorf("f_type %#x, want FUSE_SUPER_MAGIC", ms.Type)
	}
	if ms.Blocks*uint64(ms.Bsize) != bs.Blocks*uint64(bs.Bsize) {
		t.Errorf("total size %d×%d through the mount, %d×%d in BACKING", ms.Blocks, ms.Bsize, bs.Blocks, bs.Bsize)
	}
	if ms.Files != bs.Files {
		t.Errorf("f_files %d through the mount, %d in BACKING", ms.Files, bs.Files)
	}
	if ms.Namelen != bs.Namelen {
		t.Errorf("f_namelen %d through the mount, %d in BACKING", ms.Namelen, bs.Namelen)
	}
	if ms.Bfree == 0 || ms.Bavail == 0 || ms.Bfree > ms.Blocks {
		t.Errorf("free blocks %d avail %d of %d", ms.Bfree, ms.Bavail, ms.Blocks)
	}
	// df, the program, agrees that the mount has space.
	out := run(t, "", nil, "df", "-P", m.Dir)
	if !strings.Contains(out, m.Dir) {
		t.Errorf("df output lacks the mount: %q", out)
	}
}

// TestRenameat2: RENAME_NOREPLACE and RENAME_EXCHANGE.
func TestRenameat2(t *testing.T) {
	t.Parallel()
	m := mount(t)
	writeFile(t, m.Path("a"), "A")
	writeFile(t, m.Path("b"), "B")
	writeFile(t, m.Path("d/inner"), "in d")
	rename := func(from, to string, flags uint) error {
		return unix.Renameat2(unix.AT_FDCWD, m.Path(from), unix.AT_FDCWD, m.Path(to), flags)
	}
	wantErrno(t, rename("a", "b", unix.RENAME_NOREPLACE), unix.EEXIST, "RENAME_NOREPLACE onto an existing file")
	if readFile(t, m.BackingPath("a")) != "A" || readFile(t, m.BackingPath("b")) != "B" {
		t.Errorf("refused RENAME_NOREPLACE changed a file")
	}
	if err := rename("a", "c", unix.RENAME_NOREPLACE); err != nil {
		t.Errorf("RENAME_NOREPLACE to a free name: %v", err)
	}
	assertAbsent(t, m.Path("a"))
	assertAbsent(t, m.BackingPath("a"))
	if got := readFile(t, m.BackingPath("c")); got != "A" {
		t.Errorf("BACKING c = %q", got)
	}
	if err := rename("b", "c", unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("RENAME_EXCHANGE: %v", err)
	}
	for name, want := range map[string]string{"b": "A", "c": "B"} {
		if got := readFile(t, m.Path(name)); got != want {
			t.Errorf("after exchange %s = %q through the mount, want %q", name, got, want)
		}
		if got := readFile(t, m.BackingPath(name)); got != want {
			t.Errorf("after exchange BACKING %s = %q, want %q", name, got, want)
		}
	}
	// A file and a directory exchange too.
	if err := rename("b", "d", unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("RENAME_EXCHANGE file<->dir: %v", err)
	}
	if got := readFile(t, m.Path("b/inner")); got != "in d" {
		t.Errorf("b/inner after exchange = %q", got)
	}
	if got := readFile(t, m.Path("d")); got != "A" {
		t.Errorf("d after exchange = %q", got)
	}
	wantErrno(t, rename("d", "missing", unix.RENAME_EXCHANGE), unix.ENOENT, "RENAME_EXCHANGE with a missing name")
	wantErrno(t, rename("c", "d", unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE), unix.EINVAL, "NOREPLACE|EXCHANGE")
}

// TestUtimensat: UTIME_NOW and UTIME_OMIT through utimensat(2).
func TestUtimensat(t *testing.T) {
	t.Parallel()
	m := mount(t)
	writeFile(t, m.Path("f"), "x")
	if err := os.Symlink("f", m.Path("l")); err != nil {
		t.Fatal(err)
	}
	t1 := unix.NsecToTimespec(time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC).UnixNano())
	t2 := unix.NsecToTimespec(time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())
	set := func(name string, at, mt unix.Timespec, flags int) {
		t.Helper()
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, m.Path(name), []unix.Timespec{at, mt}, flags); err != nil {
			t.Fatalf("utimensat %s: %v", name, err)
		}
	}
	omit := unix.Timespec{Nsec: unix.UTIME_OMIT}
	now := unix.Timespec{Nsec: unix.UTIME_NOW}
	both := func(name string) (*unix.Stat_t, *unix.Stat_t) {
		return lstat(t, m.Path(name)), lstat(t, m.BackingPath(name))
	}
	set("f", t1, t2, 0)
	ms, bs := both("f")
	if ms.Atim != t1 || ms.Mtim != t2 || bs.Atim != t1 || bs.Mtim != t2 {
		t.Errorf("explicit times: mount a=%v m=%v, BACKING a=%v m=%v; want a=%v m=%v", ms.Atim, ms.Mtim, bs.Atim, bs.Mtim, t1, t2)
	}
	before := time.Now().Add(-2 * time.Second)
	set("f", omit, now, 0)
	ms, bs = both("f")
	if ms.Atim != t1 || bs.Atim != t1 {
		t.Errorf("UTIME_OMIT changed atime: mount %v BACKING %v, want %v", ms.Atim, bs.Atim, t1)
	}
	if mt := time.Unix(ms.Mtim.Unix()); mt.Before(before) || ms.Mtim != bs.Mtim {
		t.Errorf("UTIME_NOW mtime: mount %v BACKING %v, want now", ms.Mtim, bs.Mtim)
	}
	mtimeNow := ms.Mtim
	set("f", now, omit, 0)
	ms, bs = both("f")
	if ms.Mtim != mtimeNow || bs.Mtim != mtimeNow {
		t.Errorf("UTIME_OMIT changed mtime: mount %v BACKING %v, want %v", ms.Mtim, bs.Mtim, mtimeNow)
	}
	if at := time.Unix(ms.Atim.Unix()); at.Before(before) || ms.Atim != bs.Atim {
		t.Errorf("UTIME_NOW atime: mount %v BACKING %v", ms.Atim, bs.Atim)
	}
	// On the symlink itself, not its target.
	target := lstat(t, m.BackingPath("f")).Mtim
	set("l", t1, t1, unix.AT_SYMLINK_NOFOLLOW)
	ms, bs = both("l")
	if ms.Mtim != t1 || bs.Mtim != t1 {
		t.Errorf("symlink mtime: mount %v BACKING %v, want %v", ms.Mtim, bs.Mtim, t1)
	}
	if got := lstat(t, m.BackingPath("f")).Mtim; got != target {
		t.Errorf("AT_SYMLINK_NOFOLLOW changed the target's mtime")
	}
}

// fuseRequests counts the FUSE requests of an opcode (e.g. "READ") that
// realmfs --debug logged (go-fuse's "rx ID: OPCODE ..." lines).
func fuseRequests(t *testing.T, m *Mount, opcode string) int {
	t.Helper()
	b, err := os.ReadFile(m.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "rx "); ok {
			if f := strings.Fields(rest); len(f) > 1 && f[1] == opcode {
				n++
			}
		}
	}
	return n
}

// TestPassthrough: a 64 MiB file reads back identical with passthrough on
// (the default as root) and off; with it on, no READ request reaches the
// daemon (counted in its --debug log), with it off they do.
func TestPassthrough(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []string
	}{
		{"on", nil},
		{"off", []string{"passthrough=off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mount(t, Opts(tc.opts...), Flags("--debug"), Prepare(func(m *Mount) {
				if err := os.WriteFile(m.BackingPath("big"), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}))
			got, err := os.ReadFile(m.Path("big"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("passthrough=%s: read %d bytes, differing from BACKING", tc.name, len(got))
			}
			reads := fuseRequests(t, m, "READ")
			t.Logf("passthrough=%s: %d READ requests reached the daemon for a 64 MiB read", tc.name, reads)
			if opens := fuseRequests(t, m, "OPEN"); opens == 0 {
				t.Fatalf("no OPEN in the --debug log: cannot tell whether passthrough engaged")
			}
			if tc.name == "on" && reads != 0 {
				t.Errorf("passthrough=on: %d READ requests reached the daemon; passthrough did not engage", reads)
			}
			if tc.name == "off" && reads == 0 {
				t.Errorf("passthrough=off: no READ request reached the daemon; passthrough was not turned off")
			}
			// Random-offset reads and mmap agree too.
			f, err := os.Open(m.Path("big"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, off := range []int64{0, 1, 4095, 1 << 20, size - 7} {
				buf := make([]byte, 8192)
				n, err := f.ReadAt(buf, off)
				if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
					t.Errorf("pread at %d: %d bytes, %v", off, n, err)
				}
			}
			mm, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				t.Fatalf("mmap: %v", err)
			}
			if !bytes.Equal(mm, data) {
				t.Errorf("mmap content differs")
			}
			unix.Munmap(mm)
			// Written through the mount, read back through the mount and BACKING.
			if err := os.WriteFile(m.Path("copy"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(m.Path("copy")); err != nil || !bytes.Equal(got, data) {
				t.Errorf("copy through the mount differs: %v", err)
			}
			if got, err := os.ReadFile(m.BackingPath("copy")); err != nil || !bytes.Equal(got, data) {
				t.Errorf("copy in BACKING differs: %v", err)
			}
		})
	}
}

// TestManyFilesRoundTrip: files of 4 KiB (REALM_MANY_FILES: 5,000; make
// test 2,000) created through the mount in nested directories all read
// back with their content, with passthrough on and off (inode numbers of
// freed files get reused by later ones, from the second file on, since
// each commit frees the empty file it replaces: a node table keyed by
// stale inode numbers shows up here as spurious refusals).
func TestManyFilesRoundTrip(t *testing.T) {
	t.Parallel()
	n := envInt(t, "REALM_MANY_FILES", 5000)
	for _, pt := range []string{"on", "off"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			t.Parallel()
			m := mount(t, Opts("passthrough="+pt))
			path := func(i int) string {
				return m.Path(fmt.Sprintf("m%d", i/1000), fmt.Sprintf("l%d", i/100%10), fmt.Sprintf("f%05d", i))
			}
			content := func(i int) []byte {
				return bytes.Repeat([]byte(fmt.Sprintf("%07d\n", i)), 512)
			}
			for i := range n {
				if i%100 == 0 {
					if err := os.MkdirAll(filepath.Dir(path(i)), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(path(i), content(i), 0o644); err != nil {
					t.Fatalf("creating file %d: %v", i, err)
				}
			}
			failures := 0
			for i := range n {
				got, err := os.ReadFile(path(i))
				if err != nil || !bytes.Equal(got, content(i)) {
					failures++
					if failures <= 5 {
						t.Errorf("reading back %s: %d bytes, %v (errno %s)", path(i), len(got), err, errnoName(errnoOf(err)))
					}
				}
			}
			if failures > 0 {
				t.Errorf("%d of %d files did not read back", failures, n)
			}
		})
	}
}

// TestOpenNeverAnswersENOSYS: a backing filesystem that answers an open
// with ENOSYS must not make the kernel stop sending OPEN (fc->no_open),
// which would skip every check realm makes at open. realmfs built for
// tests takes the calls away with a seccomp filter; every open and create
// then fails with EIO, the second as the first (the kernel still asks).
func TestOpenNeverAnswersENOSYS(t *testing.T) {
	t.Parallel()
	bin := realmtestBinary(t)
	t.Run("open", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Binary(bin, "REALMFS_TEST_SYSFAIL=open"), Prepare(func(m *Mount) {
			writeFile(t, m.BackingPath("f"), "content\n")
			writeFile(t, m.BackingPath(".env"), "SECRET=1\n")
		}))
		waitLog(t, m, "system calls taken away")
		for i := range 3 {
			_, err := os.ReadFile(m.Path("f"))
			wantErrno(t, err, unix.EIO, fmt.Sprintf("read #%d with a backing open that answers ENOSYS", i+1))
			err = os.WriteFile(m.Path("f"), []byte("x"), 0o644)
			wantErrno(t, err, unix.EIO, fmt.Sprintf("write #%d", i+1))
			err = os.WriteFile(m.Path(fmt.Sprintf("new%d", i)), []byte("x"), 0o644)
			wantErrno(t, err, unix.EIO, fmt.Sprintf("create #%d", i+1))
			_, err = os.ReadFile(m.Path(".env"))
			if errnoOf(err) != unix.EIO && errnoOf(err) != unix.EACCES {
				t.Errorf("read .env #%d: %v, want EIO or EACCES", i+1, err)
			}
		}
		if got := readFile(t, m.BackingPath("f")); got != "content\n" {
			t.Errorf("f = %q", got)
		}
	})
	t.Run("opendir", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Binary(bin, "REALMFS_TEST_SYSFAIL=opendir"), Prepare(func(m *Mount) {
			os.Mkdir(m.BackingPath("d"), 0o755)
			writeFile(t, m.BackingPath("d", "f"), "content\n")
		}))
		waitLog(t, m, "system calls taken away")
		for i := range 3 {
			_, err := os.ReadDir(m.Path("d"))
			wantErrno(t, err, unix.EIO, fmt.Sprintf("readdir #%d with a backing opendir that answers ENOSYS", i+1))
		}
	})
}

// waitInFuse waits until this process's thread tid is blocked in a request
// to a FUSE daemon: the state a blocking call reaches that no one announces,
// so it is polled (as mountUsers recognises such threads), with a deadline.
func waitInFuse(t *testing.T, tid int, what string) {
	t.Helper()
	wchan := fmt.Sprintf("/proc/self/task/%d/wchan", tid)
	deadline := time.Now().Add(mountTimeout)
	for {
		w, err := os.ReadFile(wchan)
		if err == nil && (strings.Contains(string(w), "fuse") || string(w) == "request_wait_answer") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (thread %d) never blocked in a FUSE request (wchan %q, %v)", what, tid, w, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLog waits for the daemon's log to hold text.
func waitLog(t *testing.T, m *Mount, text string) {
	t.Helper()
	deadline := time.Now().Add(mountTimeout)
	for !strings.Contains(readFile(t, m.LogFile), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's log never said %q:\n%s", text, m.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// accessACL encodes a POSIX access ACL (system.posix_acl_access): the
// owner, one named user, the group, the mask and others, with rwx bits.
func accessACL(owner, uid, user, group, mask, other uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, owner, ^uint32(0)}, {2, user, uint32(uid)}, {4, group, ^uint32(0)}, {0x10, mask, ^uint32(0)}, {0x20, other, ^uint32(0)}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// TestAccessACLs: ACLs in BACKING decide access through the mount as they
// do natively, for a user the mode bits alone would judge otherwise: one
// that an ACL grants reads a 0600 file, one it denies cannot read a 0644
// one. A chmod through the mount updates the ACL's mask, and a write keeps
// the ACL.
func TestAccessACLs(t *testing.T) {
	t.Parallel()
	requireTool(t, "cat", "setpriv")
	m := mount(t, Opts("allow_other"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("granted"), "granted\n")
		writeFile(t, m.BackingPath("denied"), "denied\n")
		if err := os.Chmod(m.BackingPath("granted"), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, acl := range map[string][]byte{
			"granted": accessACL(6, nobody, 4, 0, 4, 0),
			"denied":  accessACL(6, nobody, 0, 4, 4, 4),
		} {
			if err := unix.Setxattr(m.BackingPath(name), "system.posix_acl_access", acl, 0); err != nil {
				t.Fatalf("setting an ACL in BACKING: %v", err)
			}
		}
	}))
	asNobody := func(path string) (string, error) {
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", path).CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"granted", true}, {"denied", false}} {
		native, nerr := asNobody(m.BackingPath(tc.name))
		mounted, merr := asNobody(m.Path(tc.name))
		if (nerr == nil) != tc.ok || (merr == nil) != tc.ok || tc.ok && mounted != native {
			t.Errorf("%s as nobody: natively %q (%v), through the mount %q (%v); want both %s", tc.name, native, nerr, mounted, merr,
				map[bool]string{true: "allowed", false: "refused"}[tc.ok])
		}
	}
	if err := os.Chmod(m.Path("denied"), 0o640); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path("denied"), "rewritten\n")
	buf := make([]byte, 64)
	n, err := unix.Getxattr(m.BackingPath("denied"), "system.posix_acl_access", buf)
	if err != nil {
		t.Fatalf("the ACL is gone after a chmod and a write through the mount: %v", err)
	}
	if want := accessACL(6, nobody, 0, 4, 4, 0); !bytes.Equal(buf[:n], want) {
		t.Errorf("ACL after chmod 640 = %x, want %x (others cleared)", buf[:n], want)
	}
}
