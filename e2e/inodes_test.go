package e2e

// Identities and the backing dir's housekeeping, end to end:
//
//   - an object keeps one inode number on the mount for as long as the
//     kernel knows it, also one whose backing number a rewritten file's
//     node still answers to (TestMadeUpInodeNumbersStay);
//   - the mount-time sweep of a crash's temps finishes, however soon the
//     mount is unmounted (TestSweepFinishesBeforeExit);
//   - an in-place write into a sparse file copies its data, not its holes
//     (TestSparseWriteStaysSparse).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// madeUp marks the inode numbers the mount makes up (fusefs/inodes.BorrowedBit).
const madeUp = 1 << 63

// TestMadeUpInodeNumbersStay: a directory whose backing inode number a
// rewritten file's node still answers to gets a number the mount makes
// up; a later lookup of it (entry_timeout=0: every path walk looks the
// name up again) must give the same number and the same node, or the
// kernel drops the entry and every process whose cwd it is sees it
// deleted (getcwd: ENOENT; redis's make -j2 and npm install met it).
//
// The recipe: each file rewritten through the mount frees its backing
// number while its node (held open by an O_PATH descriptor) keeps it; a
// directory made right after in the same directory gets the lowest free
// number of the block group on ext4, which is that one.
func TestMadeUpInodeNumbersStay(t *testing.T) {
	requireTool(t, "python3")
	m := mount(t, Opts("entry_timeout=0", "attr_timeout=0"))
	const n = 48
	var dirs []string
	for k := range n {
		f := m.Path(fmt.Sprintf("f%d", k))
		writeFile(t, f, "one")
		fd, err := unix.Open(f, unix.O_PATH, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		writeFile(t, f, "two") // a commit: the old backing number is free
		d := m.Path(fmt.Sprintf("d%d", k))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if lstat(t, d).Ino&madeUp != 0 {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skip("the backing filesystem gave no new directory a number a rewritten file's node keeps")
	}
	t.Logf("%d of %d directories have made-up inode numbers", len(dirs), n)

	// One process holds each directory open; its cwd moves into each at
	// the check.
	p := startProc(t, exec.Command("python3", append([]string{"-u", "-c", `
import os, subprocess, sys
fds = [(p, os.open(p, os.O_RDONLY | os.O_DIRECTORY)) for p in sys.argv[1:]]
inos = [os.fstat(fd).st_ino for _, fd in fds]
print("ready", flush=True)
sys.stdin.readline()
for (p, fd), ino in zip(fds, inos):
    os.fchdir(fd)
    try:
        cwd = os.getcwd()
    except OSError as e:
        cwd = "getcwd:" + e.strerror.replace(" ", "_")
    r = subprocess.run(["/bin/pwd"], capture_output=True, text=True)
    pwd = r.stdout.strip() or "pwd:" + r.stderr.strip().replace(" ", "_")
    print(p, cwd, pwd, ino, os.stat(".").st_ino, flush=True)
`}, dirs...)...), true)
	p.line(t, time.Minute, "python ready")
	// Every directory's name is looked up again, as make and npm do.
	before := map[string]uint64{}
	for _, d := range dirs {
		before[d] = lstat(t, d).Ino
	}
	for _, d := range dirs {
		if now := lstat(t, d).Ino; now != before[d] {
			t.Errorf("%s: inode number %d, then %d", filepath.Base(d), before[d], now)
		}
	}
	if _, err := p.stdin.Write([]byte("check\n")); err != nil {
		t.Fatal(err)
	}
	for range dirs {
		f := strings.Fields(p.line(t, time.Minute, "python check"))
		if len(f) != 5 {
			t.Fatalf("python: %q", f)
		}
		d, cwd, pwd, was, now := f[0], f[1], f[2], f[3], f[4]
		if cwd != d || pwd != d {
			t.Errorf("cwd in %s: getcwd %s, /bin/pwd %s", filepath.Base(d), cwd, pwd)
		}
		if want := fmt.Sprint(lstat(t, d).Ino); was != want || now != want {
			t.Errorf("%s: inode number %s when opened, %s by stat of ., %s by its name", filepath.Base(d), was, now, want)
		}
	}
	p.closeStdin()
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
}

// TestSweepFinishesBeforeExit: the mount-time sweep of the temps a crash
// left (.realm-tmp-* files) runs while the mount serves; a mount unmounted
// at once must still leave none of them behind (1 of 10 kill -9 rounds
// did).
func TestSweepFinishesBeforeExit(t *testing.T) {
	const dirs, perDir = 100, 40
	m := mount(t, Prepare(func(m *Mount) {
		for d := range dirs {
			dir := m.BackingPath(fmt.Sprintf("d%03d", d), "sub")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range perDir {
				writeFile(t, filepath.Join(dir, fmt.Sprintf(".realm-tmp-%04x%04x", d, i)), "crash")
			}
			writeFile(t, filepath.Join(dir, "kept"), "kept")
		}
	}))
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if left := tempResidue(t, m.Backing); len(left) > 0 {
		t.Errorf("%d of %d temps left in BACKING after mount and unmount, e.g. %s", len(left), dirs*perDir, left[0])
	}
	if got := readFile(t, m.BackingPath("d000", "sub", "kept")); got != "kept" {
		t.Errorf("kept: %q", got)
	}
}

// TestSparseWriteStaysSparse: a 1-byte write into a 1 GiB sparse file
// through the mount goes to a temp seeded from the file; the temp copies
// the file's data and keeps its holes, so the file committed in BACKING
// still allocates next to nothing (a 1-byte write into a 2 GiB file took
// 3.45 s and 2 GiB before), and the byte is there.
func TestSparseWriteStaysSparse(t *testing.T) {
	requireTool(t, "truncate", "dd", "du")
	m := mount(t, Prepare(func(m *Mount) {
		run(t, m.Backing, nil, "truncate", "-s", "1G", "sparse")
		run(t, m.Outside, nil, "truncate", "-s", "1G", "sparse")
	}))
	write := func(path string) time.Duration {
		start := time.Now()
		cmd := exec.Command("dd", "of="+path, "bs=1", "seek=500M", "conv=notrunc", "status=none")
		cmd.Stdin = strings.NewReader("x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dd of=%s: %v: %s", path, err, out)
		}
		return time.Since(start)
	}
	native := write(filepath.Join(m.Outside, "sparse"))
	mounted := write(m.Path("sparse"))
	t.Logf("1-byte write into a 1 GiB sparse file: native %v, realmfs %v", native, mounted)
	st := lstat(t, m.BackingPath("sparse"))
	if st.Size != 1<<30 {
		t.Errorf("size %d, want 1 GiB", st.Size)
	}
	if st.Blocks*512 > 1<<20 {
		t.Errorf("the file allocates %d KiB in BACKING after a 1-byte write (du: %s)", st.Blocks/2,
			strings.TrimSpace(run(t, m.Backing, nil, "du", "-k", "sparse")))
	}
	for _, p := range []string{m.BackingPath("sparse"), m.Path("sparse")} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 3)
		_, err = f.ReadAt(b, 500<<20-1)
		f.Close()
		if err != nil || string(b) != "\x00x\x00" {
			t.Errorf("%s: bytes at 500M-1: %q (%v), want \"\\x00x\\x00\"", p, b, err)
		}
	}
}
