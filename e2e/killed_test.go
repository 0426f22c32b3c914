package e2e

// Nothing written is silently lost (issue 18):
//
//   - a writer killed by a signal: its bytes are committed where that tears
//     nothing old (a file it created or found empty, an append), and kept
//     as NAME.realm-recovered-* otherwise, the file byte-identical; each
//     is one audit line (TestKilledWriterKeepsItsBytes);
//   - another owner's chmod, chown or touch of a file being written is
//     EBUSY, and does not divert the write to a conflict copy; the owner's
//     own touch is allowed and diverts nothing (TestMetadataWhileWritten);
//   - a conflict copy of a file whose name is long still fits NAME_MAX and
//     holds the bytes (TestLongNameConflictCopy);
//   - a process that renames another file over the file it holds open for
//     append (or removes it) closes it without error, as natively
//     (TestRenameOverOwnAppend);
//   - the issue's own case, `cmd > new-file` killed: TestKilledRedirectKeepsOutput;
//   - a reader of the owner beside a killed rewrite: TestKilledWriterBesideOwnersReader.

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// killedWriter is a python writer: it opens argv[1] as argv[2] says, writes
// argv[3] (at offset 0 for "inplace"), fsyncs and writes argv[4] if given,
// prints "ready" and waits for its stdin, which the test never closes.
const killedWriter = `
import os, signal, sys
# A test run under nohup would hand down SIGHUP ignored; the writer dies of
# every signal the test sends, as a writer normally would.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
path, mode, data = sys.argv[1], sys.argv[2], sys.argv[3].encode()
flags = {"new": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
         "append": os.O_WRONLY | os.O_APPEND,
         "trunc": os.O_WRONLY | os.O_TRUNC,
         "inplace": os.O_WRONLY}[mode]
fd = os.open(path, flags, 0o644)
os.write(fd, data)
if len(sys.argv) > 4:
    os.fsync(fd)
    os.write(fd, sys.argv[4].encode())
print("ready", flush=True)
sys.stdin.read()
`

// TestKilledWriterKeepsItsBytes: a writer killed by SIGTERM, SIGKILL or
// SIGHUP before it closes the file. A file it created, or one it appended
// to, holds what it wrote (WRITER_KILLED_COMMITTED); a file it rewrote
// (O_TRUNC) or wrote in place keeps its old content byte for byte, and the
// new bytes are in NAME.realm-recovered-* beside it
// (WRITER_KILLED_RECOVERED). Before, every one of these bytes was dropped.
func TestKilledWriterKeepsItsBytes(t *testing.T) {
	t.Parallel()
	type kcase struct {
		file, mode, old string
		write           []string // what the writer writes (a second part after an fsync)
		want, recovered string   // recovered "": no recovery copy
		sig             syscall.Signal
	}
	long := strings.Repeat("L", 240)
	var cases []kcase
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGHUP} {
		s := unix.SignalName(sig)
		cases = append(cases,
			kcase{"new-" + s, "new", "", []string{"new bytes\n"}, "new bytes\n", "", sig},
			kcase{"append-" + s, "append", "old\n", []string{"appended\n"}, "old\nappended\n", "", sig},
			kcase{"trunc-" + s, "trunc", "old content\n", []string{"new\n"}, "old content\n", "new\n", sig},
			kcase{"inplace-" + s, "inplace", "old content\n", []string{"NEW"}, "old content\n", "NEW content\n", sig},
		)
	}
	cases = append(cases,
		// The bytes after an fsync, which committed the first part.
		kcase{"fsync-new", "new", "", []string{"first\n", "second\n"}, "first\nsecond\n", "", syscall.SIGKILL},
		kcase{"fsync-trunc", "trunc", "old\n", []string{"first\n", "second\n"}, "first\n", "first\nsecond\n", syscall.SIGKILL},
		// A recovery copy of a file whose name leaves no room for the suffix.
		kcase{long, "trunc", "old\n", []string{"new\n"}, "old\n", "new\n", syscall.SIGKILL},
	)
	m := mount(t, Prepare(func(m *Mount) {
		for _, tc := range cases {
			if tc.mode != "new" {
				writeFile(t, m.BackingPath(tc.file), tc.old)
			}
		}
	}))
	for _, tc := range cases {
		what := tc.file
		if len(what) > 20 {
			what = what[:8] + "…(240 bytes)"
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append([]string{"-c", killedWriter, tc.file, tc.mode}, tc.write...)
		cmd := exec.CommandContext(ctx, "python3", args...)
		cmd.Dir = m.Dir
		w := startProc(t, cmd, true)
		if line := w.line(t, 20*time.Second, what+" writer"); line != "ready" {
			t.Fatalf("%s: writer said %q, want ready", what, line)
		}
		cmd.Process.Signal(tc.sig)
		w.wait()
		cancel()
		waitNoTemp(t, m)
		if got := readFile(t, m.BackingPath(tc.file)); got != tc.want {
			t.Errorf("%s after its writer was killed by %v: BACKING holds %q, want %q", what, tc.sig, got, tc.want)
		}
		if got := readFile(t, m.Path(tc.file)); got != tc.want {
			t.Errorf("%s: the mount shows %q, want %q", what, got, tc.want)
		}
		copies := sideCopies(t, m, tc.file, "recovered")
		code := "WRITER_KILLED_COMMITTED"
		if tc.recovered == "" {
			if len(copies) != 0 {
				t.Errorf("%s: recovery copies %q, want none", what, copies)
			}
		} else {
			code = "WRITER_KILLED_RECOVERED"
			if len(copies) != 1 {
				t.Errorf("%s: recovery copies %q, want one", what, copies)
			} else {
				if got := readFile(t, m.BackingPath(copies[0])); got != tc.recovered {
					t.Errorf("%s: recovery copy holds %q, want %q", what, got, tc.recovered)
				}
				if got := readFile(t, m.Path(copies[0])); got != tc.recovered {
					t.Errorf("%s: recovery copy through the mount holds %q, want %q", what, got, tc.recovered)
				}
			}
		}
		m.WaitAudit(code+" for "+what, func(e auditEntry) bool {
			return e.path() == tc.file && e.str("code") == code && strings.Contains(e.str("cause"), unix.SignalName(tc.sig))
		})
	}
}

// TestKilledWriterBesideOwnersReader: a reader of the writer's own owner
// (a tail of the log, a checker) that opened the file after the rewrite
// began shares the owner's write, but not its bytes. A writer killed then
// is judged as if alone: the file keeps its old content, the new bytes go
// to a recovery copy at once. Before, the reader's presence left the bytes
// pending, and the reader's close committed the killed rewrite over the
// old content (TestModel seed 860029089007 found the same rule broken).
func TestKilledWriterBesideOwnersReader(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old content\n") }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-c", killedWriter, "f", "trunc", "new\n")
	cmd.Dir = m.Dir
	w := startProc(t, cmd, true)
	if line := w.line(t, 20*time.Second, "writer"); line != "ready" {
		t.Fatalf("writer said %q, want ready", line)
	}
	// The test process is the writer's owner (one cgroup): its open
	// joins the write and reads the writer's bytes.
	r, err := os.Open(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "new\n" {
		t.Fatalf("the owner's reader reads %q, %v; want the writer's bytes", b, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	w.wait()
	m.WaitAudit("WRITER_KILLED_RECOVERED", func(e auditEntry) bool {
		return e.path() == "f" && e.str("code") == "WRITER_KILLED_RECOVERED"
	})
	if got := readFile(t, m.BackingPath("f")); got != "old content\n" {
		t.Errorf("after the kill BACKING holds %q, want the old content", got)
	}
	copies := sideCopies(t, m, "f", "recovered")
	if len(copies) != 1 || readFile(t, m.BackingPath(copies[0])) != "new\n" {
		t.Errorf("recovery copies %q, want one holding the new bytes", copies)
	}
	if err := r.Close(); err != nil {
		t.Errorf("the reader's close: %v", err)
	}
	if got := readFile(t, m.Path("f")); got != "old content\n" {
		t.Errorf("after the reader's close the mount shows %q, want the old content", got)
	}
	if got := readFile(t, m.BackingPath("f")); got != "old content\n" {
		t.Errorf("after the reader's close BACKING holds %q, want the old content", got)
	}
}

// sideCopies lists the copies of kind ("recovered", "conflict") kept
// beside file in the backing root: names that begin with a prefix of
// file's name and carry the suffix.
func sideCopies(t *testing.T, m *Mount, file, kind string) []string {
	t.Helper()
	ents, err := os.ReadDir(m.Backing)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		i := strings.Index(n, ".realm-"+kind+"-")
		if i > 0 && strings.HasPrefix(file, n[:i]) && len(n) <= unix.NAME_MAX {
			out = append(out, n)
		}
	}
	return out
}

// TestMetadataWhileWritten: while one owner writes a file, another owner's
// touch, chmod and chown of it fail with EBUSY (LOCK_CONFLICT) and leave
// the write alone: the writer's close commits, no conflict copy is made.
// Before, the touch went through and the writer's close got EBUSY, its
// bytes diverted to a conflict copy. The writing owner's own touch (one
// owner per cgroup here: the test and its helper) is allowed, lands in the
// committed file, and diverts nothing.
func TestMetadataWhileWritten(t *testing.T) {
	t.Parallel()
	t.Run("other owner", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
		before := stateOf(t, m.BackingPath("f"))
		finish := holdWrite(t, m.Path("f"), "holder's bytes\n")
		past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		var errs []error
		lockedThread(func() {
			errs = append(errs,
				os.Chtimes(m.Path("f"), past, past),
				unix.UtimesNanoAt(unix.AT_FDCWD, m.Path("f"), nil, 0), // touch: now
				os.Chmod(m.Path("f"), 0o600),
				os.Chown(m.Path("f"), os.Getuid(), os.Getgid()))
		})
		for i, op := range []string{"utimensat(2001)", "utimensat(now)", "chmod", "chown"} {
			wantErrno(t, errs[i], unix.EBUSY, "another owner's "+op+" while f is written")
		}
		m.WaitRefusal("setattr", "f", "LOCK_CONFLICT", unix.EBUSY)
		if d := before.diff(stateOf(t, m.BackingPath("f"))); d != "" {
			t.Errorf("f changed under the refused changes: %s", d)
		}
		if line := finish(); line != "close ok" {
			t.Errorf("writer: %q, want close ok", line)
		}
		if got := readFile(t, m.BackingPath("f")); got != "holder's bytes\n" {
			t.Errorf("f after the writer's close = %q", got)
		}
		if copies := sideCopies(t, m, "f", "conflict"); len(copies) > 0 {
			t.Errorf("conflict copies %q: the write was diverted", copies)
		}
		// Once the writer is done, anyone may.
		if err := os.Chtimes(m.Path("f"), past, past); err != nil {
			t.Errorf("touch once the writer is done: %v", err)
		}
	})
	t.Run("same owner", func(t *testing.T) {
		t.Parallel()
		m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "old\n") }))
		finish := holdWrite(t, m.Path("f"), "holder's bytes\n")
		past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		if err := os.Chtimes(m.Path("f"), past, past); err != nil {
			t.Errorf("the writing owner's touch: %v", err)
		}
		if err := os.Chmod(m.Path("f"), 0o640); err != nil {
			t.Errorf("the writing owner's chmod: %v", err)
		}
		if line := finish(); line != "close ok" {
			t.Errorf("writer after its owner's touch: %q, want close ok", line)
		}
		waitNoTemp(t, m)
		if got := readFile(t, m.BackingPath("f")); got != "holder's bytes\n" {
			t.Errorf("f after the writer's close = %q", got)
		}
		if copies := sideCopies(t, m, "f", "conflict"); len(copies) > 0 {
			t.Errorf("conflict copies %q: the owner's own touch diverted its write", copies)
		}
		st := lstat(t, m.BackingPath("f"))
		if st.Mtim.Sec != past.Unix() || st.Mode&0o777 != 0o640 {
			t.Errorf("f after the commit: mtime %v, mode %o; want the owner's touch (%v) and chmod (640)", time.Unix(st.Mtim.Unix()), st.Mode&0o777, past)
		}
	})
}

// TestLongNameConflictCopy: a file with a 240-byte name, changed in BACKING
// while written through the mount: close gets EBUSY, the file is as the
// outside process left it, and the mount's bytes are in a conflict copy
// whose name fits NAME_MAX. Before, the copy's name was too long and the
// bytes were dropped.
func TestLongNameConflictCopy(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("c", 240)
	m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath(name), "original\n") }))
	fd, err := unix.Open(m.Path(name), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, []byte("mine\n")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.BackingPath(name), "outside\n")
	wantErrno(t, unix.Close(fd), unix.EBUSY, "close after an outside change")
	if got := readFile(t, m.BackingPath(name)); got != "outside\n" {
		t.Errorf("BACKING holds %q, want the outside content", got)
	}
	copies := sideCopies(t, m, name, "conflict")
	if len(copies) != 1 {
		t.Fatalf("conflict copies %q, want one\n%s", copies, m.logTail())
	}
	if got := readFile(t, m.BackingPath(copies[0])); got != "mine\n" {
		t.Errorf("conflict copy holds %q, want the mount's bytes", got)
	}
	if got := readFile(t, m.Path(copies[0])); got != "mine\n" {
		t.Errorf("conflict copy through the mount holds %q", got)
	}
	waitNoTemp(t, m)
}

// TestRenameOverOwnAppend: a process holding f open for append renames
// another file over f (or removes f and makes a new one) and writes on.
// Natively its writes go to the old, now nameless file and its close
// succeeds; so here: close returns 0, f is the file moved there, and no
// conflict copy is made. Before, the close got EBUSY and the appended
// bytes went to a conflict copy.
func TestRenameOverOwnAppend(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		for _, n := range []string{"f", "p", "u"} {
			writeFile(t, m.BackingPath(n), "old\n")
		}
	}))
	// The reproduction, in the shell.
	out := shell(t, m.Dir, `exec 3>>f; echo a >&3; echo new > g; mv g f; echo b >&3; exec 3>&- && echo closed`)
	if out != "closed\n" {
		t.Errorf("shell: %q", out)
	}
	// The same in python, which reports close's errno.
	py := `
import os, sys
name, how = sys.argv[1], sys.argv[2]
fd = os.open(name, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"a\n")
if how == "rename":
    with open(name + ".new", "w") as g:
        g.write("new\n")
    os.rename(name + ".new", name)
else:
    os.unlink(name)
    with open(name, "w") as g:
        g.write("new\n")
os.write(fd, b"b\n")
try:
    os.close(fd)
    print("close ok")
except OSError as e:
    print("close", e.errno)
`
	for _, tc := range []struct{ name, how string }{{"p", "rename"}, {"u", "unlink"}} {
		if got := run(t, m.Dir, nil, "python3", "-c", py, tc.name, tc.how); got != "close ok\n" {
			t.Errorf("%s (%s over the file held for append): %q, want close ok", tc.name, tc.how, got)
		}
	}
	waitNoTemp(t, m)
	for _, n := range []string{"f", "p", "u"} {
		if got := readFile(t, m.BackingPath(n)); got != "new\n" {
			t.Errorf("%s = %q, want the file put there", n, got)
		}
		if copies := sideCopies(t, m, n, "conflict"); len(copies) > 0 {
			t.Errorf("%s: conflict copies %q", n, copies)
		}
	}
	for _, e := range m.Audit() {
		if e.str("code") == "LOCK_CONFLICT" {
			t.Errorf("audit: %v", e)
		}
	}
	if names := conflictCopies(t, m.Backing); len(names) > 0 {
		t.Errorf("left beside the files: %q", names)
	}
}

// TestKilledRedirectKeepsOutput: the case, a command writing into a
// new file through the shell's `>` and killed before it exits (as
// `realmctl session exec --timeout` kills a command's whole tree): the
// file holds what it printed. Before, the file was left empty.
func TestKilledRedirectKeepsOutput(t *testing.T) {
	t.Parallel()
	m := mount(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGKILL} {
		file := "k-" + unix.SignalName(sig) + ".txt"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", `exec python3 -c '
import signal, sys
signal.signal(signal.SIGHUP, signal.SIG_DFL)
print("hello", flush=True)
print("ready", file=sys.stderr, flush=True)
sys.stdin.read()' > `+file)
		cmd.Dir = m.Dir
		errOut, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		w := startProc(t, cmd, true)
		if line := readLine(t, bufio.NewReader(errOut), 20*time.Second, file+" writer"); line != "ready" {
			t.Fatalf("%s: writer said %q, want ready", file, line)
		}
		cmd.Process.Signal(sig)
		w.wait()
		cancel()
		waitNoTemp(t, m)
		if got := readFile(t, m.Path(file)); got != "hello\n" {
			t.Errorf("%s after its writer was killed by %v: %q, want %q", file, sig, got, "hello\n")
		}
		m.WaitAudit("WRITER_KILLED_COMMITTED for "+file, func(e auditEntry) bool {
			return e.path() == file && e.str("code") == "WRITER_KILLED_COMMITTED"
		})
	}
}
