package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/templive"
)

// TestPrograms drives real programs through one mount, each in its own
// directory, and checks what they produced both through the mount and in
// BACKING.
func TestPrograms(t *testing.T) {
	t.Parallel()
	m := mount(t)
	for _, tc := range []struct {
		name  string
		tools []string
		fn    func(t *testing.T, m *Mount, rel string) // rel: the subtest's own directory
	}{
		{"sh", []string{"sh"}, testShell},
		{"cp -a", []string{"cp", "diff"}, testCpA},
		{"mv", []string{"mv"}, testMv},
		{"ln", []string{"ln"}, testLn},
		{"tar", []string{"tar", "diff"}, testTar},
		{"sed -i", []string{"sed"}, testSedInPlace},
		{"python3 atomic save", []string{"python3"}, testPythonAtomicSave},
		{"git", []string{"git"}, testGit},
		{"sqlite3", []string{"sqlite3"}, testSqlite},
		{"go build", []string{"go"}, testGoBuild},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireTool(t, tc.tools...)
			t.Parallel()
			rel := strings.NewReplacer(" ", "_", "-", "").Replace(tc.name)
			dir := m.Path(rel)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.fn(t, m, rel)
		})
	}
}

func testShell(t *testing.T, m *Mount, rel string) {
	out := run(t, m.Path(rel), nil, "sh", "-c", `
set -e
mkdir -p a/b/c
echo hello > a/b/c/f
cat a/b/c/f >> a/b/c/g
printf 'world\n' >> a/b/c/g
for i in 1 2 3 4 5; do echo "$i" > "a/n$i"; done
rm a/n3
test ! -e a/n3
ls a | tr '\n' ' '
wc -l < a/b/c/g
`)
	if want := "b n1 n2 n4 n5 2\n"; strings.Join(strings.Fields(out), " ")+"\n" != want {
		t.Errorf("sh output %q, want %q", out, want)
	}
	if got := readFile(t, m.BackingPath(rel, "a/b/c/g")); got != "hello\nworld\n" {
		t.Errorf("BACKING a/b/c/g = %q", got)
	}
	assertAbsent(t, m.BackingPath(rel, "a/n3"))
}

// makeTree writes a small but varied tree: nested dirs, an empty file, a
// 1 MiB file, modes, an inside symlink, and an old mtime.
func makeTree(t *testing.T, root string) {
	t.Helper()
	writeFile(t, filepath.Join(root, "top.txt"), "top\n")
	writeFile(t, filepath.Join(root, "empty"), "")
	writeFile(t, filepath.Join(root, "a/b/c/deep.txt"), "deep\n")
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i/4096)
	}
	if err := os.WriteFile(filepath.Join(root, "a/big.bin"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "a/exec.sh"), "#!/bin/sh\necho hi\n")
	if err := os.Chmod(filepath.Join(root, "a/exec.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b/c/deep.txt", filepath.Join(root, "a/link")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(root, "top.txt"), old, old); err != nil {
		t.Fatal(err)
	}
}

func testCpA(t *testing.T, m *Mount, rel string) {
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	dst := m.Path(rel, "copy")
	run(t, "", nil, "cp", "-a", src, dst)
	run(t, "", nil, "diff", "-r", "--no-dereference", src, dst)
	run(t, "", nil, "diff", "-r", "--no-dereference", src, m.BackingPath(rel, "copy"))
	for _, name := range []string{"top.txt", "a/big.bin", "a/exec.sh", "a/link", "a/b"} {
		s, d := lstat(t, filepath.Join(src, name)), lstat(t, filepath.Join(dst, name))
		if s.Mode != d.Mode {
			t.Errorf("%s: mode %o through the mount, %o in the source", name, d.Mode, s.Mode)
		}
		if s.Mode&unix.S_IFMT != unix.S_IFDIR && s.Mtim != d.Mtim {
			t.Errorf("%s: mtime %v through the mount, %v in the source (cp -a keeps it)", name, d.Mtim, s.Mtim)
		}
	}
}

func testMv(t *testing.T, m *Mount, rel string) {
	dir := m.Path(rel)
	writeFile(t, filepath.Join(dir, "f"), "file")
	writeFile(t, filepath.Join(dir, "d/inner"), "inner")
	native := filepath.Join(t.TempDir(), "from-outside")
	writeFile(t, native, "crossed")
	run(t, dir, nil, "mv", "f", "g")
	run(t, dir, nil, "mv", "d", "e")
	run(t, dir, nil, "mv", "g", "e/")
	run(t, dir, nil, "mv", native, "e/crossed") // across filesystems: copy + unlink
	for name, want := range map[string]string{"e/g": "file", "e/inner": "inner", "e/crossed": "crossed"} {
		if got := readFile(t, m.BackingPath(rel, name)); got != want {
			t.Errorf("BACKING %s = %q, want %q", name, got, want)
		}
	}
	for _, gone := range []string{"f", "g", "d"} {
		assertAbsent(t, filepath.Join(dir, gone))
		assertAbsent(t, m.BackingPath(rel, gone))
	}
	assertAbsent(t, native)
}

func testLn(t *testing.T, m *Mount, rel string) {
	dir := m.Path(rel)
	writeFile(t, filepath.Join(dir, "f"), "target")
	run(t, dir, nil, "ln", "f", "hard")
	run(t, dir, nil, "ln", "-s", "f", "soft")
	run(t, dir, nil, "mkdir", "sub")
	run(t, dir, nil, "ln", "-s", "../f", "sub/up")
	if st := lstat(t, filepath.Join(dir, "hard")); st.Nlink != 2 {
		t.Errorf("nlink of hard = %d, want 2", st.Nlink)
	}
	if lstat(t, filepath.Join(dir, "f")).Ino != lstat(t, filepath.Join(dir, "hard")).Ino {
		t.Errorf("f and hard have different inode numbers through the mount")
	}
	for _, name := range []string{"hard", "soft", "sub/up"} {
		if got := readFile(t, filepath.Join(dir, name)); got != "target" {
			t.Errorf("reading %s = %q", name, got)
		}
	}
	if got := strings.TrimSpace(run(t, dir, nil, "readlink", "soft")); got != "f" {
		t.Errorf("readlink soft = %q", got)
	}
	if target, err := os.Readlink(m.BackingPath(rel, "sub/up")); err != nil || target != "../f" {
		t.Errorf("BACKING sub/up -> %q, %v", target, err)
	}
}

// tarSource is a real source tree for tar and the benchmark-like tests.
func tarSource(t *testing.T) string {
	t.Helper()
	const goNet = "/usr/local/go/src/net"
	if st, err := os.Stat(goNet); err == nil && st.IsDir() {
		return goNet
	}
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)
	for i := range 200 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("gen/d%02d/f%03d.txt", i%17, i)), strings.Repeat("line\n", i))
	}
	return src
}

func testTar(t *testing.T, m *Mount, rel string) {
	src := tarSource(t)
	work := t.TempDir()
	archive := filepath.Join(work, "src.tar")
	run(t, "", nil, "tar", "-C", src, "-cf", archive, ".")

	// tar x into the mount, compare with the source tree.
	x := m.Path(rel, "x")
	if err := os.Mkdir(x, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "tar", "-C", x, "-xf", archive)
	run(t, "", nil, "diff", "-r", "--no-dereference", src, x)
	run(t, "", nil, "diff", "-r", "--no-dereference", src, m.BackingPath(rel, "x"))

	// tar c from the mount into the mount, then extract natively and compare.
	inMount := m.Path(rel, "again.tar")
	run(t, "", nil, "tar", "-C", x, "-cf", inMount, ".")
	back := filepath.Join(work, "back")
	if err := os.Mkdir(back, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "tar", "-C", back, "-xf", inMount)
	run(t, "", nil, "diff", "-r", "--no-dereference", src, back)
	// The listing of both archives names the same entries.
	if a, b := run(t, "", nil, "tar", "-tf", archive), run(t, "", nil, "tar", "-tf", inMount); sortedLines(a) != sortedLines(b) {
		t.Errorf("tar -t of the archive made through the mount differs from the source archive")
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimPrefix(lines[i], "./")
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func testSedInPlace(t *testing.T, m *Mount, rel string) {
	p := m.Path(rel, "conf")
	writeFile(t, p, "alpha=1\nbeta=2\nalpha=3\n")
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "sed", "-i", "s/alpha/gamma/", p)
	run(t, "", nil, "sed", "-i.bak", "/beta/d", p)
	if got := readFile(t, m.BackingPath(rel, "conf")); got != "gamma=1\ngamma=3\n" {
		t.Errorf("after sed -i: %q", got)
	}
	if got := readFile(t, m.BackingPath(rel, "conf.bak")); got != "gamma=1\nbeta=2\ngamma=3\n" {
		t.Errorf("sed backup: %q", got)
	}
	if st := lstat(t, p); st.Mode&0o777 != 0o640 {
		t.Errorf("sed -i changed the mode to %o", st.Mode&0o777)
	}
	assertOnlyNames(t, m.Path(rel), "conf", "conf.bak")
}

// assertOnlyNames fails unless dir lists exactly names (no temp residue).
func assertOnlyNames(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Name() != journal.DirName && e.Name() != templive.Dir { // BACKING's journal, the daemons' marks: never on the mount
			got = append(got, e.Name())
		}
	}
	slices.Sort(got)
	slices.Sort(names)
	if strings.Join(got, "/") != strings.Join(names, "/") {
		t.Errorf("%s lists %q, want %q", dir, got, names)
	}
}

const pythonAtomicSave = `
import os, sys, tempfile
path, n = sys.argv[1], int(sys.argv[2])
d = os.path.dirname(path)
for i in range(n):
    data = ("version %d\n" % i) * (i + 1)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".save-")
    with os.fdopen(fd, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    with open(path) as f:
        got = f.read()
    if got != data:
        sys.exit("save %d: read back %r" % (i, got[:40]))
print("saved", n)
`

func testPythonAtomicSave(t *testing.T, m *Mount, rel string) {
	p := m.Path(rel, "doc.txt")
	writeFile(t, p, "original\n")
	out := run(t, "", nil, "python3", "-c", pythonAtomicSave, p, "50")
	if strings.TrimSpace(out) != "saved 50" {
		t.Errorf("python3: %q", out)
	}
	if got, want := readFile(t, m.BackingPath(rel, "doc.txt")), strings.Repeat("version 49\n", 50); got != want {
		t.Errorf("BACKING doc.txt after 50 saves: %d bytes, want %d", len(got), len(want))
	}
	assertOnlyNames(t, m.Path(rel), "doc.txt")
	assertOnlyNames(t, m.BackingPath(rel), "doc.txt")
}

func testGit(t *testing.T, m *Mount, rel string) {
	dir := m.Path(rel, "repo")
	home := t.TempDir()
	env := []string{
		"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Realm Test", "GIT_AUTHOR_EMAIL=test@realm.invalid",
		"GIT_COMMITTER_NAME=Realm Test", "GIT_COMMITTER_EMAIL=test@realm.invalid",
	}
	git := func(args ...string) string {
		t.Helper()
		return run(t, dir, env, "git", args...)
	}
	run(t, m.Path(rel), env, "git", "-c", "init.defaultBranch=main", "init", "-q", "repo")
	writeFile(t, filepath.Join(dir, "README"), "first\n")
	writeFile(t, filepath.Join(dir, "src/main.c"), "int main(void) { return 0; }\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("git status after commit: %q", st)
	}
	git("branch", "feature")
	git("checkout", "-q", "feature")
	writeFile(t, filepath.Join(dir, "README"), "feature\n")
	if st := git("status", "--porcelain"); strings.TrimSpace(st) != "M README" {
		t.Errorf("git status after edit: %q", st)
	}
	git("commit", "-q", "-am", "feature change")
	git("checkout", "-q", "main")
	if got := readFile(t, filepath.Join(dir, "README")); got != "first\n" {
		t.Errorf("README on main = %q", got)
	}
	git("checkout", "-q", "feature")
	if got := readFile(t, filepath.Join(dir, "README")); got != "feature\n" {
		t.Errorf("README on feature = %q", got)
	}
	if log := strings.Fields(git("log", "--format=%s", "-n", "5")); strings.Join(log, " ") != "feature change first" {
		t.Errorf("git log: %q", log)
	}
	if br := git("branch", "--format=%(refname:short)"); strings.Join(strings.Fields(br), " ") != "feature main" {
		t.Errorf("git branch: %q", br)
	}
	git("gc", "-q")
	git("fsck", "--strict")
	// The repository is equally valid read from BACKING directly.
	run(t, m.BackingPath(rel, "repo"), env, "git", "fsck", "--strict")
}

func testSqlite(t *testing.T, m *Mount, rel string) {
	for _, mode := range []string{"delete", "wal"} {
		t.Run(mode, func(t *testing.T) {
			db := m.Path(rel, mode+".db")
			var sql strings.Builder
			fmt.Fprintf(&sql, "PRAGMA journal_mode=%s;\nCREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\n", mode)
			for tx := range 10 {
				sql.WriteString("BEGIN;\n")
				for i := range 100 {
					n := tx*100 + i
					fmt.Fprintf(&sql, "INSERT INTO t (id, v) VALUES (%d, '%s');\n", n, strings.Repeat("x", n%97))
				}
				sql.WriteString("COMMIT;\n")
			}
			cmd := strings.NewReader(sql.String())
			out, err := runStdin(t, cmd, "sqlite3", db)
			if err != nil {
				t.Fatalf("sqlite3 inserts: %v\n%s", err, out)
			}
			// Reopen.
			out = run(t, "", nil, "sqlite3", db, "SELECT count(*), sum(id) FROM t; PRAGMA integrity_check;")
			if got := strings.Fields(out); strings.Join(got, " ") != "1000|499500 ok" {
				t.Errorf("after reopen: %q, want count 1000, sum 499500, integrity ok", out)
			}
			// The file in BACKING is the same database.
			out = run(t, "", nil, "sqlite3", m.BackingPath(rel, mode+".db"), "PRAGMA integrity_check; SELECT count(*) FROM t;")
			if got := strings.Fields(out); strings.Join(got, " ") != "ok 1000" {
				t.Errorf("BACKING database: %q", out)
			}
		})
	}
}

func testGoBuild(t *testing.T, m *Mount, rel string) {
	dir := m.Path(rel, "hello")
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/hello\n\ngo 1.22\n")
	// Only package os from the standard library, so that a cold GOCACHE
	// builds little beyond the runtime.
	writeFile(t, filepath.Join(dir, "main.go"), `package main

import (
	"os"

	"example.com/hello/greet"
)

func main() { os.Stdout.WriteString(greet.Hello("realm") + "\n") }
`)
	writeFile(t, filepath.Join(dir, "greet/greet.go"), `package greet

// Hello greets name.
func Hello(name string) string { return "hello, " + name }
`)
	env := []string{
		"GOFLAGS=-mod=mod", "GOCACHE=" + t.TempDir(), "GOPROXY=off",
		"GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0",
	}
	run(t, dir, env, "go", "build", "-o", "hello", ".")
	if out := run(t, dir, nil, "./hello"); out != "hello, realm\n" {
		t.Errorf("built program printed %q", out)
	}
	if st := lstat(t, m.BackingPath(rel, "hello", "hello")); st.Mode&0o111 == 0 || st.Size < 1000 {
		t.Errorf("BACKING hello binary: mode %o size %d", st.Mode, st.Size)
	}
}

// TestExec: programs and scripts stored in the mount can be executed.
func TestExec(t *testing.T) {
	t.Parallel()
	m := mount(t)
	if err := copyFile("/bin/echo", m.Path("echo"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path("script.sh"), "#!/bin/sh\necho script ran\n")
	if err := os.Chmod(m.Path("script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prog, want string }{
		{"./echo", "binary ran\n"},
		{"./script.sh", "script ran\n"},
	} {
		args := []string{}
		if tc.prog == "./echo" {
			args = []string{"binary", "ran"}
		}
		out, err := runErr(t, m.Dir, nil, tc.prog, args...)
		if err != nil || out != tc.want {
			t.Errorf("executing %s from the mount: %q, %v (errno %s)", tc.prog, out, err, errnoName(errnoOf(err)))
		}
	}
}

// TestVenvFallsBackToCopies: plain `python3 -m venv venv` works on the
// mount (README): its symlink of venv/bin/python3 to the interpreter's
// absolute path is refused (one PATH_ESCAPE line), venv warns and copies
// the interpreter instead, and the venv runs. --copies never tries.
func TestVenvFallsBackToCopies(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	m := mount(t)
	// The interpreter itself, not a pyenv shim (which would look for pyenv
	// in the run's HOME).
	py := strings.TrimSpace(run(t, "", nil, "python3", "-c", "import sys; print(sys.executable)"))
	out := run(t, m.Dir, nil, py, "-m", "venv", "--without-pip", "venv")
	if st := lstat(t, m.BackingPath("venv", "bin", "python3")); st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf("venv/bin/python3 has mode %#o in BACKING; want a copied regular file", st.Mode)
	}
	if got := strings.TrimSpace(run(t, m.Dir, nil, m.Path("venv", "bin", "python3"), "-c", "import sys; print(sys.prefix != sys.base_prefix)")); got != "True" {
		t.Errorf("venv/bin/python3 does not run as a venv: %q (venv said %q)", got, out)
	}
	m.WaitRefusal("symlink", "venv/bin/python3", "PATH_ESCAPE", unix.EACCES)
}

// TestLargeReadsQuiet: a read the kernel asks in one 1 MiB request (more
// than a pipe holds with its header, at the default pipe-max-size) is
// answered whole, without go-fuse's failed splice and its WARN line for
// each one (issue 34: 434 WARN lines a day).
func TestLargeReadsQuiet(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("passthrough=off"))
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	if err := os.WriteFile(m.BackingPath("big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	// O_DIRECT: each read(2) is one READ request of its size; a read open
	// is served by a read handle, a write open by a write handle.
	for _, flags := range []int{unix.O_RDONLY, unix.O_RDWR} {
		fd, err := unix.Open(m.Path("big"), flags|unix.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if n == 0 {
				break
			}
			got = append(got, buf[:n]...)
		}
		unix.Close(fd)
		if !bytes.Equal(got, data) {
			t.Fatalf("open %#x: read %d bytes; want the 3 MiB written", flags, len(got))
		}
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if log := readFile(t, m.LogFile); strings.Contains(log, "trySplice") {
		t.Errorf("the daemon log reports failed splices:\n%s", log)
	}
}

// TestQuietLogSQLiteWAL: ordinary work writes no WARN line to the daemon
// log (issue 34: a day of use wrote 434, among them one for every normal
// close of a WAL database's -shm): an SQLite database in WAL mode, written
// in transactions and closed, then read back.
func TestQuietLogSQLiteWAL(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	m := mount(t)
	script := `
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("pragma journal_mode=wal")
db.execute("create table t(x)")
for i in range(50):
    db.execute("begin immediate")
    db.execute("insert into t values(?)", (i,))
    db.execute("commit")
db.close()
print(sqlite3.connect(sys.argv[1]).execute("select count(*) from t").fetchone()[0])
`
	if out := strings.TrimSpace(run(t, m.Dir, nil, "python3", "-c", script, "app.db")); out != "50" {
		t.Fatalf("rows after the WAL writes: %q, want 50", out)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(readFile(t, m.LogFile), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the daemon log warns of ordinary work: %s", line)
		}
	}
}
