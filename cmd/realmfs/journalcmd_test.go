package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/fusefs/journal/diff"
)

// journalFixture is a BACKING whose journal the store's API wrote, as
// the daemon's producers do: each change's intent, the change, its end.
type journalFixture struct {
	t    *testing.T
	path string
	root int
	j    *journal.Journal
}

func newJournalFixture(t *testing.T) *journalFixture {
	t.Helper()
	p := t.TempDir()
	root, err := dirfd.OpenRoot(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirfd.Close(root) })
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	j, err := journal.Open(root, journal.DefaultDir, journal.Options{Now: func() time.Time {
		now = now.Add(time.Second)
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &journalFixture{t: t, path: p, root: root, j: j}
}

func (f *journalFixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *journalFixture) write(name, data string, mode os.FileMode) {
	f.t.Helper()
	f.must(os.WriteFile(filepath.Join(f.path, name), []byte(data), mode))
	f.must(os.Chmod(filepath.Join(f.path, name), mode))
}

func (f *journalFixture) obj(name string) *journal.Object {
	f.t.Helper()
	var st unix.Stat_t
	f.must(unix.Lstat(filepath.Join(f.path, name), &st))
	return journal.ObjectOf(&st)
}

// rewrite replaces name's content as a commit does: a temp renamed over
// it, the old file kept by link.
func (f *journalFixture) rewrite(owner, name, data string) {
	f.t.Helper()
	f.write(".tmp", data, 0o644)
	keep, err := unix.Open(filepath.Join(f.path, name), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	f.must(err)
	defer unix.Close(keep)
	tmp := f.obj(".tmp")
	after := tmp.ID()
	c, err := f.j.Begin(journal.Record{Owner: owner, Op: journal.OpRewrite, Path: name, Before: f.obj(name), After: &after}, keep)
	f.must(err)
	f.must(os.Rename(filepath.Join(f.path, ".tmp"), filepath.Join(f.path, name)))
	f.must(c.Done(nil))
}

// change journals one change that op makes (before it: the object at
// path; nil when there was none).
func (f *journalFixture) change(rec journal.Record, op func() error) {
	f.t.Helper()
	c, err := f.j.Begin(rec, journal.NoKeep)
	f.must(err)
	if op == nil {
		f.must(c.Abort())
		return
	}
	f.must(op())
	f.must(c.Done(nil))
}

// fill makes the tree and the changes the tests read: a rewrite (kept),
// a create, an unlink, a rename, a chmod, an aborted change, a binary
// rewrite, a mkdir.
func (f *journalFixture) fill() {
	p := func(n string) string { return filepath.Join(f.path, n) }
	f.write("a.txt", "one\ntwo\nthree\n", 0o644)
	f.write("old.txt", "bye\n", 0o644)
	f.write("mv.txt", "moving\n", 0o644)
	f.write("run.sh", "#!/bin/sh\n", 0o644)
	f.write("bin.dat", "\x00\x01\x02", 0o644)
	f.rewrite("session:1", "a.txt", "one\nTWO\nthree\n")
	f.change(journal.Record{Owner: "session:1", Op: journal.OpCreate, Path: "new.txt"},
		func() error { return os.WriteFile(p("new.txt"), []byte("hello\n"), 0o644) })
	_, err := f.j.Remove(journal.Record{Owner: "session:1", Op: journal.OpUnlink, Path: "old.txt"}, f.root, "old.txt")
	f.must(err)
	f.change(journal.Record{Owner: "pid:42", Op: journal.OpRename, Path: "mv.txt", To: "moved.txt", Before: f.obj("mv.txt")},
		func() error { return os.Rename(p("mv.txt"), p("moved.txt")) })
	f.change(journal.Record{Owner: "session:1", Op: journal.OpChmod, Path: "run.sh", Before: f.obj("run.sh")},
		func() error { return os.Chmod(p("run.sh"), 0o755) })
	f.change(journal.Record{Owner: "session:1", Op: journal.OpChmod, Path: "a.txt", Before: f.obj("a.txt")}, nil)
	f.rewrite("session:1", "bin.dat", "\x00\x01\x02\x03")
	f.change(journal.Record{Owner: "session:1", Op: journal.OpMkdir, Path: "dir"},
		func() error { return os.Mkdir(p("dir"), 0o755) })
	// The last end is held (fusefs/journal's ends.go) until a timer, the
	// next intent or the writer's own read writes it: the commands read
	// beside the open journal as beside a daemon, so write it first.
	_, err = f.j.Records(journal.Filter{})
	f.must(err)
}

func TestJournalCommands(t *testing.T) {
	f := newJournalFixture(t)
	f.fill()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"list", []string{"list"}, `SEQ  TIME                      OWNER      OP       END      KEPT  PATH
1    2026-12-03T17:00:01.000Z  session:1  rewrite  done     kept  a.txt
2    2026-12-03T17:00:02.000Z  session:1  create   done     -     new.txt
3    2026-12-03T17:00:03.000Z  session:1  unlink   done     kept  old.txt
4    2026-12-03T17:00:04.000Z  pid:42     rename   done     -     mv.txt → moved.txt
5    2026-12-03T17:00:05.000Z  session:1  chmod    done     -     run.sh
6    2026-12-03T17:00:06.000Z  session:1  chmod    aborted  -     a.txt
7    2026-12-03T17:00:07.000Z  session:1  rewrite  done     kept  bin.dat
8    2026-12-03T17:00:08.000Z  session:1  mkdir    done     -     dir
`},
		{"list by owner since", []string{"list", "--owner", "session:1", "--since", "2026-12-03T17:00:05Z"}, `SEQ  TIME                      OWNER      OP       END      KEPT  PATH
5    2026-12-03T17:00:05.000Z  session:1  chmod    done     -     run.sh
6    2026-12-03T17:00:06.000Z  session:1  chmod    aborted  -     a.txt
7    2026-12-03T17:00:07.000Z  session:1  rewrite  done     kept  bin.dat
8    2026-12-03T17:00:08.000Z  session:1  mkdir    done     -     dir
`},
		{"diff", []string{"diff"}, `modified a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
created file new.txt
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
deleted file old.txt
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
renamed mv.txt → moved.txt
mode run.sh: 0644 → 0755
modified bin.dat: binary, 3 → 4 bytes
created directory dir
`},
		{"diff of an owner", []string{"diff", "--owner", "pid:42"}, "renamed mv.txt → moved.txt\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{"journal"}, tc.args[0], f.path), tc.args[1:]...)
			if code := run(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("realmfs journal %s:\n%s\nwant:\n%s", strings.Join(tc.args, " "), out.String(), tc.want)
			}
		})
	}
}

func TestJournalListJSON(t *testing.T) {
	f := newJournalFixture(t)
	f.fill()
	var out, errb bytes.Buffer
	if code := run([]string{"journal", "list", f.path, "--since", "2026-12-03T17:00:04Z", "--owner", "pid:42", "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	o := f.obj("moved.txt")
	want := `{"seq":4,"time":"2026-12-03T17:00:04Z","owner":"pid:42","op":"rename","path":"mv.txt","to":"moved.txt","end":"done","kept":false,"before":{"type":"file","dev":` +
		itoa(o.Dev) + `,"ino":` + itoa(o.Ino) + `,"mode":33188,"uid":` + itoa(uint64(o.Uid)) + `,"gid":` + itoa(uint64(o.Gid)) + `,"size":7,"mtime":"` +
		o.Mtime.Format(time.RFC3339Nano) + `","atime":"`
	if !strings.HasPrefix(out.String(), want) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("list -o json:\n%s\nwant a line starting:\n%s", out.String(), want)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestJournalUsage: bad input is a usage error naming the flag (2); a
// BACKING with no journal says so, with its path (1); --help is output.
func TestJournalUsage(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list", empty, "--since", "yesterday"}, 2, `--since "yesterday"`},
		{[]string{"list", empty, "--since", "-5m"}, 2, `--since "-5m"`},
		{[]string{"list", empty, "-o", "yaml"}, 2, `-o "yaml"`},
		{[]string{"diff", empty, "-o", "json"}, 2, `-o "json"`},
		{[]string{"list", empty, "--bogus"}, 2, "--bogus"},
		{[]string{"list"}, 2, "one TARGET"},
		{[]string{"show", empty}, 2, `unknown command "show"`},
		{[]string{}, 2, "list, diff or undo"},
		{[]string{"undo", empty}, 2, "undo needs --owner"},
		{[]string{"list", empty, "--dry-run"}, 2, "--dry-run: only undo"},
		{[]string{"undo", empty, "--owner", "session:1"}, 1, empty + " has no journal"},
		{[]string{"list", empty}, 1, empty + " has no journal"},
		{[]string{"diff", empty, "--journal-dir", filepath.Join(empty, "nowhere")}, 1, "--journal-dir"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"journal"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("realmfs journal %q: exit %d, stderr %q, stdout %q; want exit %d naming %q", tc.args, code, errb.String(), out.String(), tc.code, tc.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"journal", "--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Examples:") || errb.Len() != 0 {
		t.Errorf("realmfs journal --help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// dirFd opens the directory name beneath the fixture's BACKING (O_PATH).
func (f *journalFixture) dirFd(name string) int {
	f.t.Helper()
	fd, err := unix.Open(filepath.Join(f.path, name), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	f.must(err)
	f.t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func (f *journalFixture) remove(op journal.Op, dir, name string) {
	f.t.Helper()
	fd := f.root
	if dir != "" {
		fd = f.dirFd(dir)
	}
	_, err := f.j.Remove(journal.Record{Owner: "session:1", Op: op, Path: filepath.Join(dir, name)}, fd, name)
	f.must(err)
	// The removal's intent is held (a described kept/ entry says it): the
	// daemon writes what it holds before a reader reads, as here.
	f.must(f.j.WriteHeld())
}

func (f *journalFixture) rename(from, to string) {
	f.t.Helper()
	rec := journal.Record{Owner: "session:1", Op: journal.OpRename, Path: from, To: to, Before: f.obj(from)}
	keep := journal.NoKeep
	if fd, err := unix.Open(filepath.Join(f.path, to), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		defer unix.Close(fd)
		rec.Replaced, keep = f.obj(to), fd
	}
	c, err := f.j.Begin(rec, keep)
	f.must(err)
	f.must(os.Rename(filepath.Join(f.path, from), filepath.Join(f.path, to)))
	f.must(c.Done(nil))
}

// TestJournalDiffCases: the diff of sequences of changes whose names
// move: each path's state before the window against BACKING now.
func TestJournalDiffCases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes func(f *journalFixture)
		want    string
	}{
		{"rm -r", func(f *journalFixture) {
			f.must(os.Mkdir(filepath.Join(f.path, "d"), 0o755))
			f.write("d/x", "x\n", 0o600)
			f.remove(journal.OpUnlink, "d", "x")
			f.remove(journal.OpRmdir, "", "d")
		}, "deleted file d/x\n--- a/d/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\ndeleted directory d\n"},
		{"a change inside a directory renamed", func(f *journalFixture) {
			f.must(os.Mkdir(filepath.Join(f.path, "d"), 0o755))
			f.write("d/x", "x\n", 0o644)
			f.rewrite("session:1", "d/x", "y\n")
			f.rename("d", "e")
		}, "renamed d/x → e/x\n--- a/d/x\n+++ b/e/x\n@@ -1 +1 @@\n-x\n+y\nrenamed d → e\n"},
		{"rewritten, then renamed", func(f *journalFixture) {
			f.write("a", "1\n2\n", 0o644)
			f.rewrite("session:1", "a", "1\n2\n3\n")
			f.rename("a", "b")
		}, "renamed a → b\n--- a/a\n+++ b/b\n@@ -1,2 +1,3 @@\n 1\n 2\n+3\n"},
		{"renamed over a name", func(f *journalFixture) {
			f.write("x", "new\n", 0o644)
			f.write("y", "old\n", 0o644)
			f.rename("x", "y")
		}, "renamed x → y\ndeleted file y\n--- a/y\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"},
		{"deleted, then made again", func(f *journalFixture) {
			f.write("a", "before\n", 0o644)
			f.remove(journal.OpUnlink, "", "a")
			f.change(journal.Record{Owner: "session:1", Op: journal.OpCreate, Path: "a"},
				func() error { return os.WriteFile(filepath.Join(f.path, "a"), []byte("after\n"), 0o600) })
		}, "mode a: 0644 → 0600\nmodified a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-before\n+after\n"},
		{"made, then deleted", func(f *journalFixture) {
			f.change(journal.Record{Owner: "session:1", Op: journal.OpCreate, Path: "t"},
				func() error { return os.WriteFile(filepath.Join(f.path, "t"), nil, 0o644) })
			f.remove(journal.OpUnlink, "", "t")
		}, ""},
		{"appended in place, then chmod", func(f *journalFixture) {
			f.write("log", "a\nb\n", 0o644)
			f.change(journal.Record{Owner: "session:1", Op: journal.OpAppend, Path: "log", Before: f.obj("log")}, func() error {
				fh, err := os.OpenFile(filepath.Join(f.path, "log"), os.O_APPEND|os.O_WRONLY, 0)
				if err == nil {
					_, err = fh.WriteString("c\n")
					fh.Close()
				}
				return err
			})
			f.change(journal.Record{Owner: "session:1", Op: journal.OpChmod, Path: "log", Before: f.obj("log")},
				func() error { return os.Chmod(filepath.Join(f.path, "log"), 0o600) })
		}, "mode log: 0644 → 0600\nmodified log\n--- a/log\n+++ b/log\n@@ -1,2 +1,3 @@\n a\n b\n+c\n"},
		{"a binary file larger than a diff", func(f *journalFixture) {
			f.write("big", strings.Repeat("x", diff.TextLimit+1), 0o644)
			f.rewrite("session:1", "big", strings.Repeat("y", diff.TextLimit+2))
		}, "modified big: binary, 1048577 → 1048578 bytes\n"},
		{"a symlink made", func(f *journalFixture) {
			f.change(journal.Record{Owner: "session:1", Op: journal.OpSymlink, Path: "l"},
				func() error { return os.Symlink("a b/c", filepath.Join(f.path, "l")) })
		}, "created symlink l → a b/c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newJournalFixture(t)
			tc.changes(f)
			var out, errb bytes.Buffer
			if code := run([]string{"journal", "diff", f.path}, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("diff:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}
