package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// writeJournal makes, in BACKING, an edit, a create, a delete and a
// rename, each journaled with the store's API as the daemon's producers
// journal them (the intent, the change, its end).
func writeJournal(t *testing.T, backing string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(backing, name) }
	obj := func(name string) *journal.Object {
		var st unix.Stat_t
		must(unix.Lstat(p(name), &st))
		return journal.ObjectOf(&st)
	}
	for name, data := range map[string]string{"edit.txt": "alpha\nbeta\ngamma\n", "gone.txt": "farewell\n", "from.txt": "moving\n"} {
		must(os.WriteFile(p(name), []byte(data), 0o644))
	}
	root, err := dirfd.OpenRoot(backing)
	must(err)
	defer dirfd.Close(root)
	j, err := journal.Open(root, journal.DefaultDir, journal.Options{Durable: true})
	must(err)
	defer j.Close()

	must(os.WriteFile(p(".edit.tmp"), []byte("alpha\nBETA\ngamma\n"), 0o644))
	keep, err := unix.Open(p("edit.txt"), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	must(err)
	defer unix.Close(keep)
	after := obj(".edit.tmp").ID()
	c, err := j.Begin(journal.Record{Owner: "session:1", Op: journal.OpRewrite, Path: "edit.txt", Before: obj("edit.txt"), After: &after}, keep)
	must(err)
	must(os.Rename(p(".edit.tmp"), p("edit.txt")))
	must(c.Done(nil))

	c, err = j.Begin(journal.Record{Owner: "session:1", Op: journal.OpCreate, Path: "made.txt"}, journal.NoKeep)
	must(err)
	must(os.WriteFile(p("made.txt"), []byte("fresh\n"), 0o644))
	must(c.Done(nil))

	_, err = j.Remove(journal.Record{Owner: "session:1", Op: journal.OpUnlink, Path: "gone.txt"}, root, "gone.txt")
	must(err)

	c, err = j.Begin(journal.Record{Owner: "pid:7", Op: journal.OpRename, Path: "from.txt", To: "to.txt", Before: obj("from.txt")}, journal.NoKeep)
	must(err)
	must(os.Rename(p("from.txt"), p("to.txt")))
	must(c.Done(nil))
	must(j.Close())
}

// realmfsJournal runs `realmfs journal args...` and returns its stdout;
// it fails the test on a non-zero exit.
func realmfsJournal(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(realmfsBin, append([]string{"journal"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("realmfs journal %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestJournalCLI: `realmfs journal list` and `diff` read the journal of
// a BACKING, given as itself or as the mountpoint of its realmfs mount
// (found in mountinfo), while the mount is up: one edit, one create, one
// delete and one rename.
func TestJournalCLI(t *testing.T) {
	m := mount(t, Prepare(func(m *Mount) { writeJournal(t, m.Backing) }))
	for _, target := range []string{m.Dir, m.Backing} {
		list := realmfsJournal(t, "list", target)
		for _, want := range []string{
			"session:1  rewrite  done  kept  edit.txt\n",
			"session:1  create   done  -     made.txt\n",
			"session:1  unlink   done  kept  gone.txt\n",
			"pid:7      rename   done  -     from.txt → to.txt\n",
		} {
			if !strings.Contains(list, want) {
				t.Errorf("journal list %s:\n%s\nlacks %q", target, list, want)
			}
		}
		diff := realmfsJournal(t, "diff", target)
		for _, want := range []string{
			"modified edit.txt\n--- a/edit.txt\n+++ b/edit.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n",
			"created file made.txt\n--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+fresh\n",
			"deleted file gone.txt\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-farewell\n",
			"renamed from.txt → to.txt\n",
		} {
			if !strings.Contains(diff, want) {
				t.Errorf("journal diff %s:\n%s\nlacks %q", target, diff, want)
			}
		}
	}
	if got := realmfsJournal(t, "diff", m.Dir, "--owner", "pid:7"); got != "renamed from.txt → to.txt\n" {
		t.Errorf("journal diff --owner pid:7: %q", got)
	}
	json := realmfsJournal(t, "list", m.Dir, "--owner", "pid:7", "-o", "json")
	if !strings.HasPrefix(json, `{"seq":4,`) || !strings.Contains(json, `"op":"rename","path":"from.txt","to":"to.txt","end":"done"`) {
		t.Errorf("journal list -o json: %s", json)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{m.Outside}, m.Outside + " has no journal"},
		// The mountpoint names its BACKING (from mountinfo), whose
		// journal --journal-dir moves elsewhere.
		{[]string{m.Dir, "--journal-dir", m.Outside}, m.Backing + " has no journal (" + m.Outside},
	} {
		cmd := exec.Command(realmfsBin, append([]string{"journal", "list"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("journal list %q: exit %d (%v): %s; want exit 1 and %q", tc.args, code, err, out, tc.want)
		}
	}
}

// TestJournalListWhileWriting: the daemon holds the ends of its last
// changes for a moment (fusefs/journal's endsDelay) rather than write each
// alone; `realmfs journal list MOUNTPOINT` has it write them first, so a
// change made just before the command reads as done, not in progress;
// so does `journal list BACKING` while BACKING is mounted.
func TestJournalListWhileWriting(t *testing.T) {
	m := mount(t)
	for i, target := range []string{m.Dir, m.Backing} {
		writeFile(t, m.Path(fmt.Sprintf("f%d", i)), "x\n")
		if err := os.Mkdir(m.Path(fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		checkListedDone(t, realmfsJournal(t, "list", target), target)
	}
}

// checkListedDone checks that journal list's output (of target) holds a
// create and a mkdir, both done.
func checkListedDone(t *testing.T, list, target string) {
	t.Helper()
	for _, op := range []string{"create", "mkdir"} {
		found := false
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) >= 5 && f[3] == op { // SEQ TIME OWNER OP END KEPT PATH
				found = true
				if f[4] != "done" {
					t.Errorf("journal list %s right after the %s: %q, want it done", target, op, line)
				}
			}
		}
		if !found {
			t.Errorf("journal list %s has no %s:\n%s", target, op, list)
		}
	}
}
