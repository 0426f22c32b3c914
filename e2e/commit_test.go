package e2e

// Issue 14 end to end: when a write through the mount is committed. Every
// way programs write (shell redirects, dup, fork, cp, tar, editors, sed -i,
// python, SQLite, git) takes a file from its old content to its new content
// with nothing in between: a watcher reading BACKING throughout sees only
// those, kill -9 of realmfs at any moment leaves one of them, and a writer
// killed by a signal leaves the old one.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// watchBacking reads path (in BACKING, not through the mount) in a loop
// until the returned stop is called, and returns every distinct content it
// saw that ok rejects. A missing file is content nil.
func watchBacking(path string, ok func([]byte) bool) (stop func() []string) {
	var done atomic.Bool
	var bad []string
	seen := map[string]bool{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			b, err := os.ReadFile(path)
			if err != nil {
				b = nil
			}
			if !ok(b) && !seen[string(b)] {
				seen[string(b)] = true
				bad = append(bad, fmt.Sprintf("%d bytes %q", len(b), clip(string(b))))
			}
		}
	})
	return func() []string {
		done.Store(true)
		wg.Wait()
		return bad
	}
}

// shell runs script with sh in dir and fails the test if it fails.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	return run(t, dir, nil, "sh", "-c", script)
}

// writerCase is one way of rewriting the file f. It runs in the mount's
// directory with f holding old; afterwards f must hold want, and a reader of
// BACKING must never have seen anything but old, want or what also allows.
type writerCase struct {
	name  string
	old   string
	want  string
	tools []string
	setup func(t *testing.T, m *Mount) // before the write, in BACKING
	write func(t *testing.T, m *Mount)
	also  func(b []byte) bool
}

func writerCases() []writerCase {
	big := strings.Repeat("N", 1<<20)
	py := func(src string) func(*testing.T, *Mount) {
		return func(t *testing.T, m *Mount) { t.Helper(); run(t, m.Dir, nil, "python3", "-c", src) }
	}
	sh := func(script string) func(*testing.T, *Mount) {
		return func(t *testing.T, m *Mount) { t.Helper(); shell(t, m.Dir, script) }
	}
	return []writerCase{
		{name: "redirect", old: "old\n", want: big,
			write: sh(`head -c 1048576 /dev/zero | tr '\0' N > f`)},
		{name: "redirect of nothing", old: "old\n", want: "",
			write: sh(`: > f`)},
		{name: "append", old: "old\n", want: "old\nab",
			write: sh(`{ printf a; sleep 0.05; printf b; } >> f`)},
		{name: "exec 3>", old: "old\n", want: "ab",
			write: sh(`exec 3>f; printf a >&3; sleep 0.05; printf b >&3; sleep 0.05; exec 3>&-`)},
		{name: "2>&1", old: "old\n", want: "outerrout",
			write: sh(`{ printf out; sleep 0.05; printf err >&2; sleep 0.05; printf out; } > f 2>&1`)},
		{name: "dup2 then close the first", old: "old\n", want: "xy", write: py(`
import os, time
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
fd2 = os.dup(fd)
os.close(fd)
os.write(fd2, b"x"); time.sleep(0.05); os.write(fd2, b"y")
os.close(fd2)`)},
		{name: "fork inherits the descriptor", old: "old\n", want: "p1cp2", write: py(`
import os, time
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"p1")
pid = os.fork()
if pid == 0:
    time.sleep(0.02); os.write(fd, b"c"); os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.05)
os.write(fd, b"p2")
os.close(fd)`)},
		{name: "subprocess stdout", old: "old\n", want: "ab", write: py(`
import subprocess
with open("f", "w") as fh:
    subprocess.run(["sh", "-c", "printf a; sleep 0.05; printf b"], stdout=fh, check=True)`)},
		{name: "python open w", old: "old\n", want: big, write: py(`
with open("f", "w") as fh:
    for i in range(16):
        fh.write("N" * 65536); fh.flush()`)},
		{name: "cp", old: "old\n", want: big,
			setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("src"), big) },
			write: sh(`cp src f`)},
		{name: "dd conv=fsync", old: "old\n", want: big,
			setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("src"), big) },
			write: sh(`dd if=src of=f bs=4096 conv=fsync status=none`)},
		{name: "tar x", old: "old\n", want: big, tools: []string{"tar"},
			setup: func(t *testing.T, m *Mount) {
				dir := filepath.Join(m.Outside, "tarsrc")
				os.MkdirAll(dir, 0o755)
				writeFile(t, filepath.Join(dir, "f"), big)
				run(t, dir, nil, "tar", "cf", filepath.Join(m.Outside, "a.tar"), "f")
			},
			write: func(t *testing.T, m *Mount) { run(t, m.Dir, nil, "tar", "xf", filepath.Join(m.Outside, "a.tar")) },
			// tar unlinks the old file and creates the new one: its name
			// is absent, then an empty new file, as on any filesystem.
			also: func(b []byte) bool { return len(b) == 0 }},
		{name: "sed -i", old: strings.Repeat("O", 1<<20), want: big,
			write: sh(`sed -i s/O/N/g f`)},
		{name: "vim write in place", old: strings.Repeat("O", 1<<16) + "\n", want: strings.Repeat("N", 1<<16) + "\n", tools: []string{"vim.tiny"},
			write: sh(`vim.tiny -u NONE -i NONE -N -n -E -s -c 'set backupcopy=yes' -c '%s/O/N/g' -c 'wq' f`)},
		{name: "vim write by rename", old: strings.Repeat("O", 1<<16) + "\n", want: strings.Repeat("N", 1<<16) + "\n", tools: []string{"vim.tiny"},
			write: sh(`vim.tiny -u NONE -i NONE -N -n -E -s -c 'set backupcopy=no writebackup' -c '%s/O/N/g' -c 'wq' f`)},
	}
}

// TestCommitPoints: for every way of writing, a reader of BACKING sees the
// file's old content until the writer is done and its new content after,
// never anything in between (an empty file above all), and the new content
// is there when the writer has exited.
func TestCommitPoints(t *testing.T) {
	t.Parallel()
	for _, tc := range writerCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireTool(t, tc.tools...)
			m := mount(t, Prepare(func(m *Mount) {
				writeFile(t, m.BackingPath("f"), tc.old)
				if tc.setup != nil {
					tc.setup(t, m)
				}
			}))
			stop := watchBacking(m.BackingPath("f"), func(b []byte) bool {
				return b != nil && (string(b) == tc.old || string(b) == tc.want) || tc.also != nil && tc.also(b)
			})
			tc.write(t, m)
			if bad := stop(); len(bad) > 0 {
				t.Errorf("a reader of BACKING saw states other than the old and the new content: %v", bad)
			}
			if got := readFile(t, m.BackingPath("f")); got != tc.want {
				t.Errorf("after the writer: BACKING holds %d bytes %q, want %d bytes %q", len(got), clip(got), len(tc.want), clip(tc.want))
			}
			if got := readFile(t, m.Path("f")); got != tc.want {
				t.Errorf("after the writer: the mount shows %d bytes %q", len(got), clip(got))
			}
			waitNoTemp(t, m)
		})
	}
}

// waitNoTemp waits for the last release of every handle (sent after close
// returns) and fails if a temp stays behind.
func waitNoTemp(t *testing.T, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(tempResidue(t, m.Backing)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoTemp(t, m.Backing, "after the writers exited")
}

// letterFile reports whether b is size bytes of one letter, and which.
func letterFile(b []byte, size int) (byte, bool) {
	if len(b) != size || size == 0 {
		return 0, false
	}
	if bytes.Count(b, b[:1]) != size {
		return 0, false
	}
	return b[0], true
}

// TestKill9ShellRedirect is the report behind issue 14: a shell loop
// rewrites 4 files with `head | tr > f` while realmfs is killed with
// kill -9 at a random moment, 50 times. Every file is whole, old or new,
// after every kill (never empty), and no temp survives the next mount.
func TestKill9ShellRedirect(t *testing.T) {
	t.Parallel()
	const files, rounds, size = 4, 50, 2 << 20
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	m := mount(t, Prepare(func(m *Mount) {
		for i := range files {
			writeFile(t, m.BackingPath(fmt.Sprintf("k%d", i)), strings.Repeat("A", size))
		}
	}))
	script := fmt.Sprintf(`for l in B C D E F G H I J K L M N O P Q R S T U V W X Y Z; do
  for n in 0 1 2 3; do head -c %d /dev/zero | tr '\0' $l > k$n || exit 1; done
done`, size)
	changed := 0
	for round := range rounds {
		stop := startLoop(t, m.Dir, nil, script)
		time.Sleep(time.Duration(rng.IntN(80)+5) * time.Millisecond)
		if stuck := m.KillWithin(3 * time.Second); stuck != "" {
			t.Errorf("round %d: %s", round, stuck)
		}
		stop()
		for i := range files {
			b, err := os.ReadFile(m.BackingPath(fmt.Sprintf("k%d", i)))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			l, ok := letterFile(b, size)
			if !ok {
				t.Fatalf("round %d: k%d is torn or emptied: %d bytes, starts %q", round, i, len(b), clip(string(b)))
			}
			if l != 'A' {
				changed++
			}
		}
		m.Restart()
		waitNoTemp(t, m)
	}
	t.Logf("%d of %d files had a new version at their kill", changed, rounds*files)
}

// TestKill9OtherWriters: the same kill -9 of realmfs during loops of the
// other writers: python, cp, sed -i, exec 3>, SQLite in rollback-journal
// and WAL mode, git. Each leaves old or new whole content; SQLite's
// database passes its integrity check with every transaction whole; git's
// repository passes fsck.
func TestKill9OtherWriters(t *testing.T) {
	t.Parallel()
	const size = 256 << 10
	letters := func(n int) string {
		return strings.Repeat("X", n)
	}
	wholeLetters := func(t *testing.T, m *Mount) {
		b, err := os.ReadFile(m.BackingPath("f"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := letterFile(b, size); !ok {
			t.Fatalf("f is torn or emptied: %d bytes, starts %q", len(b), clip(string(b)))
		}
	}
	sqliteWhole := func(t *testing.T, m *Mount) {
		out := run(t, m.Backing, nil, "sqlite3", "db", "PRAGMA integrity_check; SELECT count(*) = (SELECT n FROM c) FROM t;")
		if out != "ok\n1\n" {
			t.Fatalf("after the kill: integrity_check and row count: %q, want ok and 1", out)
		}
	}
	for _, tc := range []struct {
		name  string
		tools []string
		setup func(t *testing.T, m *Mount)
		loop  string
		check func(t *testing.T, m *Mount)
	}{
		{name: "python", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop:  fmt.Sprintf(`while :; do for l in B C D E; do python3 -c "open('f','w').write('$l' * %d)" || exit 1; done; done`, size),
			check: wholeLetters},
		{name: "cp", setup: func(t *testing.T, m *Mount) {
			writeFile(t, m.BackingPath("f"), letters(size))
			for _, l := range "BCDE" {
				writeFile(t, m.BackingPath("src"+string(l)), strings.Repeat(string(l), size))
			}
		}, loop: `while :; do for l in B C D E; do cp src$l f || exit 1; done; done`, check: wholeLetters},
		{name: "sed -i", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop: `while :; do sed -i s/X/Y/g f && sed -i s/Y/X/g f || exit 1; done`, check: wholeLetters},
		{name: "exec 3>", setup: func(t *testing.T, m *Mount) { writeFile(t, m.BackingPath("f"), letters(size)) },
			loop:  fmt.Sprintf(`while :; do for l in B C D E; do exec 3>f; head -c %d /dev/zero | tr '\0' $l >&3; exec 3>&-; done; done`, size),
			check: wholeLetters},
		{name: "sqlite rollback journal", tools: []string{"sqlite3"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "sqlite3", "db", "CREATE TABLE t(x); CREATE TABLE c(n); INSERT INTO c VALUES(0);")
		}, loop: `while :; do sqlite3 db "BEGIN; INSERT INTO t VALUES(randomblob(3000)); UPDATE c SET n = n + 1; COMMIT;" || exit 1; done`,
			check: sqliteWhole},
		{name: "sqlite wal", tools: []string{"sqlite3"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "sqlite3", "db", "PRAGMA journal_mode=WAL; CREATE TABLE t(x); CREATE TABLE c(n); INSERT INTO c VALUES(0);")
		}, loop: `while :; do sqlite3 db "PRAGMA journal_mode=WAL; BEGIN; INSERT INTO t VALUES(randomblob(3000)); UPDATE c SET n = n + 1; COMMIT;" >/dev/null || exit 1; done`,
			check: sqliteWhole},
		{name: "git", tools: []string{"git"}, setup: func(t *testing.T, m *Mount) {
			run(t, m.Backing, nil, "git", "init", "-q")
			writeFile(t, m.BackingPath("f"), "0\n")
			run(t, m.Backing, gitEnv, "git", "add", "f")
			run(t, m.Backing, gitEnv, "git", "commit", "-q", "-m", "0")
		}, loop: `i=0; while :; do i=$((i+1)); echo $i > f; git add f && git commit -q -m $i || exit 1; done`,
			check: func(t *testing.T, m *Mount) {
				// A git killed half way leaves its lock behind, natively too.
				os.Remove(m.BackingPath(".git", "index.lock"))
				os.Remove(m.BackingPath(".git", "HEAD.lock"))
				os.Remove(m.BackingPath(".git", "refs", "heads", "master.lock"))
				os.Remove(m.BackingPath(".git", "refs", "heads", "main.lock"))
				if out, err := runErr(t, m.Backing, gitEnv, "git", "fsck", "--no-dangling", "--no-progress"); err != nil {
					t.Fatalf("git fsck after the kill: %v\n%s", err, out)
				}
				run(t, m.Backing, gitEnv, "git", "log", "-1", "--format=%s")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireTool(t, tc.tools...)
			const rounds = 8
			seed := uint64(time.Now().UnixNano())
			rng := rand.New(rand.NewPCG(seed, 3))
			m := mount(t, Prepare(func(m *Mount) { tc.setup(t, m) }))
			for round := range rounds {
				stop := startLoop(t, m.Dir, gitEnv, tc.loop)
				time.Sleep(time.Duration(rng.IntN(150)+20) * time.Millisecond)
				if stuck := m.KillWithin(3 * time.Second); stuck != "" {
					t.Errorf("round %d: %s", round, stuck)
				}
				stop()
				tc.check(t, m)
				m.Restart()
				waitNoTemp(t, m)
			}
		})
	}
}

// gitEnv makes git work without a user configuration.
var gitEnv = []string{"GIT_AUTHOR_NAME=realm", "GIT_AUTHOR_EMAIL=realm@example.invalid",
	"GIT_COMMITTER_NAME=realm", "GIT_COMMITTER_EMAIL=realm@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}

// TestKilledWriterLeavesOldContent: a writer killed by a signal before it
// closes the file does not commit what it wrote: the file keeps its old
// content and the daemon logs why. A writer that exits normally commits
// what it wrote, as close(2) at exit says it is done.
func TestKilledWriterLeavesOldContent(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		for _, f := range []string{"py9", "py15", "sh9", "pyexit"} {
			writeFile(t, m.BackingPath(f), "old "+f+"\n")
		}
	}))
	pyWriter := `
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"half of the new")
print("ready", flush=True)
if sys.argv[2] == "exit":
    os._exit(0)
time.sleep(60)`
	for _, tc := range []struct {
		file   string
		cmd    []string
		sig    syscall.Signal
		want   string
		logged bool
	}{
		{"py9", []string{"python3", "-c", pyWriter, "py9", "sleep"}, syscall.SIGKILL, "old py9\n", true},
		{"py15", []string{"python3", "-c", pyWriter, "py15", "sleep"}, syscall.SIGTERM, "old py15\n", true},
		{"sh9", []string{"sh", "-c", `exec sh -c 'printf partial; echo ready >&2; exec sleep 60' > sh9`}, syscall.SIGKILL, "old sh9\n", true},
		{"pyexit", []string{"python3", "-c", pyWriter, "pyexit", "exit"}, 0, "half of the new", false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, tc.cmd[0], tc.cmd[1:]...)
		cmd.Dir = m.Dir
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		errOut, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 2)
		for _, r := range []interface{ Read([]byte) (int, error) }{out, errOut} {
			go func() {
				buf := make([]byte, 64)
				n, _ := r.Read(buf)
				ready <- string(buf[:max(n, 0)])
			}()
		}
		// One of the two pipes says ready; the other may close at once.
		got := ""
		for range 2 {
			if got += <-ready; strings.Contains(got, "ready") {
				break
			}
		}
		if !strings.Contains(got, "ready") {
			t.Fatalf("%s: writer said %q, want ready", tc.file, got)
		}
		if tc.sig != 0 {
			cmd.Process.Signal(tc.sig)
		}
		cmd.Wait()
		cancel()
		waitNoTemp(t, m)
		if got := readFile(t, m.BackingPath(tc.file)); got != tc.want {
			t.Errorf("%s after its writer was killed by %v: BACKING holds %q, want %q", tc.file, tc.sig, got, tc.want)
		}
		if got := readFile(t, m.Path(tc.file)); got != tc.want {
			t.Errorf("%s: the mount shows %q, want %q", tc.file, got, tc.want)
		}
		logged := strings.Contains(readFile(t, m.LogFile), tc.file+": not committed: its writer")
		if logged != tc.logged {
			t.Errorf("%s: daemon log says it was not committed: %v, want %v\n%s", tc.file, logged, tc.logged, m.logTail())
		}
	}
}

// TestCloseOnExecCommits: an opener whose descriptor is closed by its own
// execve commits there (the new program already sees the new content), and
// the daemon, reading the closing thread's descriptor table, does not
// deadlock with the exec.
func TestCloseOnExecCommits(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
	out := run(t, m.Dir, nil, "python3", "-c", `
import os
fd = os.open("f", os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
os.write(fd, b"new\n")
os.execv("/bin/cat", ["cat", "f"])`)
	if out != "new\n" {
		t.Errorf("the exec'd program read %q, want the committed new content", out)
	}
	// A child that inherited the descriptor and execs commits nothing; the
	// opener's close does.
	out = run(t, m.Dir, nil, "python3", "-c", `
import os, subprocess
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"newer\n")
print(subprocess.run(["cat", "f"], pass_fds=[fd], capture_output=True).stdout.decode(), end="")
os.close(fd)
print(open("f").read(), end="")`)
	if out != "newer\nnewer\n" {
		t.Errorf("got %q: the opener sees its own bytes before its close, and after it", out)
	}
	if got := readFile(t, m.BackingPath("f")); got != "newer\n" {
		t.Errorf("BACKING holds %q", got)
	}
}

// TestPassthroughReaderAndWriter: process A holds a file open read-only
// (served by kernel passthrough as root) while B opens it for writing,
// writes and closes, as the same lock owner and as another. B's write
// succeeds and goes through a temp (BACKING's file is replaced, A's
// original is untouched); A keeps reading what it opened, as a descriptor
// of a file replaced by rename does; a new reader sees the new content;
// nobody gets an error.
func TestPassthroughReaderAndWriter(t *testing.T) {
	t.Parallel()
	for _, owner := range []string{"cgroup", "pid"} {
		t.Run(owner, func(t *testing.T) {
			t.Parallel()
			m := mount(t, Opts("lockowner="+owner), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
			before := lstat(t, m.BackingPath("f"))
			reader := startReader(t, m.Path("f"))
			if got := reader("read"); got != "old\n" {
				t.Fatalf("A read %q before the write", got)
			}
			inMount := func(script string) func() error {
				return func() error {
					cmd := exec.Command("sh", "-c", script)
					cmd.Dir = m.Dir
					return cmd.Run()
				}
			}
			for i, w := range []func() error{
				inMount("echo new > f"),
				func() error { return os.WriteFile(m.Path("f"), []byte("newer\n"), 0o644) },
				inMount("echo newest >> f"),
			} {
				if err := w(); err != nil {
					t.Errorf("write %d while A holds f open: %v", i, err)
				}
			}
			const want = "newer\nnewest\n"
			if got := readFile(t, m.BackingPath("f")); got != want {
				t.Errorf("BACKING holds %q, want %q", got, want)
			}
			if after := lstat(t, m.BackingPath("f")); after.Ino == before.Ino {
				t.Errorf("BACKING's f kept its inode %d: the write went into the file, not through a temp", after.Ino)
			}
			if got := reader("read"); got != "old\n" {
				t.Errorf("A reads %q after the writes, want what it opened (old)", got)
			}
			if got := readFile(t, m.Path("f")); got != want {
				t.Errorf("a new reader reads %q, want %q", got, want)
			}
			// A reader opened while a writer holds f, then the commit. A
			// reader of the writer's own owner sees its uncommitted bytes.
			finish := holdWrite(t, m.Path("f"), "held\n")
			r2 := startReader(t, m.Path("f"))
			wantR2 := want
			if owner == "cgroup" {
				wantR2 = "held\n"
			}
			if got := r2("read"); got != wantR2 {
				t.Errorf("a reader opened while f is written reads %q, want %q", got, wantR2)
			}
			if line := finish(); line != "close ok" {
				t.Errorf("writer: %q", line)
			}
			if got := r2("read"); got != wantR2 {
				t.Errorf("that reader after the commit reads %q, want %q", got, wantR2)
			}
			if got := readFile(t, m.Path("f")); got != "held\n" {
				t.Errorf("a new reader after the commit reads %q", got)
			}
			reader("quit")
			r2("quit")
		})
	}
}

// TestUnlinkWhileAnotherWrites: removing a file another lock owner is
// writing is refused (EBUSY, LOCK_CONFLICT) and loses nothing; the owner
// writing it may remove it (its bytes go with the file, as natively); once
// the writer is done, anyone may.
func TestUnlinkWhileAnotherWrites(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
	finish := holdWrite(t, m.Path("f"), "writer's bytes\n")
	var err error
	lockedThread(func() { err = os.Remove(m.Path("f")) })
	wantErrno(t, err, unix.EBUSY, "unlink by another owner while f is written")
	e := m.WaitAudit("LOCK_CONFLICT on unlink", func(e auditEntry) bool {
		return e.str("op") == "unlink" && e.path() == "f" && e.str("code") == "LOCK_CONFLICT"
	})
	if !e.errnoIs(unix.EBUSY) {
		t.Errorf("audit errno %q", e.str("errno"))
	}
	if line := finish(); line != "close ok" {
		t.Errorf("writer: %q", line)
	}
	if got := readFile(t, m.BackingPath("f")); got != "writer's bytes\n" {
		t.Errorf("f after the refused unlink and the writer's close: %q", got)
	}
	if err := os.Remove(m.Path("f")); err != nil {
		t.Errorf("unlink once the writer is done: %v", err)
	}
	// The writer itself may remove the file it writes.
	out := run(t, m.Dir, nil, "python3", "-c", `
import os
fd = os.open("g", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b"bytes")
os.unlink("g")
os.close(fd)
print(os.path.exists("g"))`)
	if out != "False\n" {
		t.Errorf("the writer unlinking its own file: %q", out)
	}
	assertAbsent(t, m.BackingPath("g"))
	waitNoTemp(t, m)
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
