package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs/journal"
)

// The journal's undo (issue 30): an agent's 200 seeded random changes of
// every kind, made by real programs through the mount in a session of its
// own, are undone by `realmfs journal undo --owner`, and BACKING is as it
// was before, but for a second owner's changes: its 10 files, and the one
// file it changed after the agent, which undo lists as a conflict and
// leaves as the second owner wrote it.

// undoTreeOf is BACKING's names, types, modes, contents and symlink
// targets (corpusTree), the journal's directory left out.
func undoTreeOf(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	tree := corpusTree(t, root)
	for name := range tree {
		if name == journal.DirName || strings.HasPrefix(name, journal.DirName+"/") {
			delete(tree, name)
		}
	}
	return tree
}

// agentScript draws n shell commands of every kind over the agent's part
// of the tree (dirs d0..d8, big.bin), each valid in the tree the ones
// before leave. The first changes d0/f0, the file the second owner
// changes after the agent; no later one touches it.
type agentScript struct {
	rng   *rand.Rand
	files []string // regular files the agent may change
	links []string
	dirs  []string // directories the agent may change (d0..d8 and those it made)
	next  int      // for fresh names
	big   bool     // big.bin rewritten
}

func (g *agentScript) fresh(prefix string) string {
	g.next++
	return prefix + strconv.Itoa(g.next)
}

func (g *agentScript) pick(list []string) string { return list[g.rng.IntN(len(list))] }

func (g *agentScript) dir() string {
	if len(g.dirs) == 0 || g.rng.IntN(8) == 0 {
		return "."
	}
	return g.pick(g.dirs)
}

func drop(list []string, name string) []string {
	return slices.DeleteFunc(list, func(s string) bool { return s == name })
}

// under drops from list name and every name beneath it, and returns them
// moved beneath to ("": dropped).
func under(list []string, name, to string) []string {
	var out []string
	for _, s := range list {
		rest, ok := strings.CutPrefix(s, name+"/")
		switch {
		case s == name || ok:
			if to != "" {
				if s == name {
					out = append(out, to)
				} else {
					out = append(out, to+"/"+rest)
				}
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

// command is the next step: a shell command line.
func (g *agentScript) command(step, n int) string {
	if !g.big && (step == n/2 || step == n-1) {
		g.big = true
		return "dd if=/dev/urandom of=big.bin bs=1M count=64 status=none"
	}
	for {
		switch k := g.rng.IntN(24); {
		case k < 3 && len(g.files) > 0:
			return "sed -i 's/line/LINE/' " + g.pick(g.files)
		case k < 6:
			if len(g.files) > 0 && g.rng.IntN(2) == 0 {
				return fmt.Sprintf("echo 'rewritten %d' > %s", step, g.pick(g.files))
			}
			f := filepath.Join(g.dir(), g.fresh("new"))
			g.files = append(g.files, f)
			return fmt.Sprintf("echo 'made %d' > %s", step, f)
		case k < 8 && len(g.files) > 0:
			return fmt.Sprintf("echo 'appended %d' >> %s", step, g.pick(g.files))
		case k < 9 && len(g.files) > 0:
			return fmt.Sprintf("truncate -s %d %s", g.rng.IntN(40), g.pick(g.files))
		case k < 11 && len(g.files) > 0:
			f := g.pick(g.files)
			g.files = drop(g.files, f)
			return "rm " + f
		case k < 13 && len(g.files) > 0:
			f := g.pick(g.files)
			to := filepath.Join(g.dir(), g.fresh("moved"))
			if g.rng.IntN(3) == 0 && len(g.files) > 1 {
				to = g.pick(g.files) // over another file
			}
			if to == f {
				continue
			}
			g.files = append(drop(drop(g.files, f), to), to)
			return "mv " + f + " " + to
		case k < 14 && len(g.dirs) > 0:
			d := g.pick(g.dirs)
			to := g.fresh("movedd")
			g.files, g.links, g.dirs = under(g.files, d, to), under(g.links, d, to), under(g.dirs, d, to)
			return "mv " + d + " " + to
		case k < 15 && len(g.dirs) > 3 && g.rng.IntN(3) == 0:
			d := g.pick(g.dirs)
			g.files, g.links, g.dirs = under(g.files, d, ""), under(g.links, d, ""), under(g.dirs, d, "")
			return "rm -r " + d
		case k < 17:
			d := filepath.Join(g.dir(), g.fresh("made"))
			g.dirs = append(g.dirs, d)
			return "mkdir " + d
		case k < 20 && len(g.files) > 0:
			return fmt.Sprintf("chmod %o %s", []int{0o600, 0o640, 0o644, 0o700, 0o755}[g.rng.IntN(5)], g.pick(g.files))
		case k < 22:
			l := filepath.Join(g.dir(), g.fresh("link"))
			g.links = append(g.links, l)
			return "ln -s target-" + strconv.Itoa(step) + " " + l
		case k < 24 && len(g.links) > 0:
			l := g.pick(g.links)
			g.links = drop(g.links, l)
			return "rm " + l
		}
	}
}

// undoTree makes the tree the test starts from, natively in BACKING: 10
// directories of 10 files, and big.bin.
func undoTree(t *testing.T, backing string) {
	t.Helper()
	for d := range 10 {
		dir := filepath.Join(backing, "d"+strconv.Itoa(d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 10 {
			name := filepath.Join(dir, "f"+strconv.Itoa(f))
			body := fmt.Sprintf("line 1 of %s\nline 2\n", name)
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	if err := os.WriteFile(filepath.Join(backing, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startSession runs sh -c script in the mount, in a session of its own
// (another owner under lockowner=session); its owner is session:PID.
func startSession(t *testing.T, dir, script string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// journalUndo runs `realmfs journal undo` and returns its output and exit
// status.
func journalUndo(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(realmfsBin, append([]string{"journal", "undo"}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("realmfs journal undo: %v", err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// TestJournalUndoAgent: issue 30's test. The third case runs on an ext4
// image with a journal, where a removal's intent is held and its kept/
// entry says it (fusefs/journal/described.go): a kill -9 can lose held
// intents there, which the remount rebuilds from kept/.
func TestJournalUndoAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		kill, image bool
	}{
		{"mounted", false, false},
		{"killed-daemon", true, false},
		{"killed-daemon-journaled-ext4", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("REALM_UNDO_SEED"); s != "" {
				seed, _ = strconv.ParseUint(s, 10, 64)
			}
			t.Logf("seed %d (replay: REALM_UNDO_SEED=%d go test -run TestJournalUndoAgent/%s ./e2e/)", seed, seed, tc.name)
			prepare := Prepare(func(m *Mount) { undoTree(t, m.Backing) })
			if tc.image {
				prepare = Ext4Backing(t, 512<<20, 0, func(m *Mount) { undoTree(t, m.Backing) })
			}
			testJournalUndo(t, seed, tc.kill, tc.image, prepare)
		})
	}
}

func testJournalUndo(t *testing.T, seed uint64, kill, image bool, prepare MountOption) {
	m := mount(t, Opts("lockowner=session", "journal=on"), prepare)
	if image && !loggedSince(m.daemonLog(), 0, "ordered=true") {
		t.Fatalf("the journal on the ext4 image is not ordered (no described removals):\n%s", m.logTail())
	}
	before := undoTreeOf(t, m.Backing)
	rng := rand.New(rand.NewPCG(seed, 30))
	g := &agentScript{rng: rng}
	for d := range 9 {
		if d > 0 { // d0 stays where it is: d0/f0 is the second owner's later change
			g.dirs = append(g.dirs, "d"+strconv.Itoa(d))
		}
		for f := range 10 {
			if d+f > 0 {
				g.files = append(g.files, fmt.Sprintf("d%d/f%d", d, f))
			}
		}
	}
	const steps = 200
	killAt := -1
	fifo := filepath.Join(t.TempDir(), "step")
	if kill {
		killAt = 20 + rng.IntN(steps-40)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lines := []string{"echo 'agent' >> d0/f0"}
	for i := 1; i < steps; i++ {
		if i == killAt {
			lines = append(lines, "echo "+strconv.Itoa(i)+" > "+fifo) // then blocks on the dead mount, or fails
		}
		lines = append(lines, g.command(i, steps))
	}
	// The second owner edits 10 files the agent never touches, meanwhile.
	var second []string
	for f := range 10 {
		second = append(second, fmt.Sprintf("echo 'second owner' >> d9/f%d", f))
	}
	other, otherOut := startSession(t, m.Dir, strings.Join(second, " && "))
	if kill { // the kill is for the agent's changes alone
		if err := other.Wait(); err != nil {
			t.Fatalf("the second owner: %v\n%s", err, otherOut)
		}
	}
	// set -e: once the daemon is killed, the script stops at its first
	// failing command.
	agent, agentOut := startSession(t, m.Dir, "set -e\n"+strings.Join(lines, "\n")+"\n")
	if kill {
		b, err := os.ReadFile(fifo)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killing the daemon at step %s of the agent", strings.TrimSpace(string(b)))
		m.Kill()
	}
	agentErr := agent.Wait()
	if err := other.Wait(); !kill && err != nil {
		t.Fatalf("the second owner: %v\n%s", err, otherOut)
	}
	if !kill && agentErr != nil {
		t.Fatalf("the agent: %v\n%s\nscript:\n%s", agentErr, agentOut, strings.Join(lines, "\n"))
	}
	if kill {
		m.Restart()
		if b, err := os.ReadFile(m.daemonLog()); err == nil { // what recovery did, for the reader
			lines := strings.Split(string(b), "\n")
			for i := len(lines) - 1; i >= 0; i-- {
				if strings.Contains(lines[i], "journal opened") {
					t.Logf("after the restart: %s", lines[i])
					break
				}
			}
		}
	}
	run(t, m.Dir, nil, "sh", "-c", "echo 'second owner, after the agent' >> d0/f0")
	secondTree := undoTreeOf(t, m.Backing)
	out, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	t.Logf("journal undo:\n%s", out)
	if code != 1 || !strings.Contains(out, "conflict d0/f0:") || strings.Count(out, "conflict ") != 1 {
		t.Errorf("journal undo: exit %d, want 1 and one conflict, d0/f0:\n%s", code, out)
	}
	after := undoTreeOf(t, m.Backing)
	want := maps.Clone(before)
	for f := range 10 {
		name := fmt.Sprintf("d9/f%d", f)
		want[name] = secondTree[name]
	}
	want["d0/f0"] = secondTree["d0/f0"]
	if diffs, _ := diffTrees(want, after, nil); len(diffs) > 0 {
		t.Errorf("BACKING after the undo is not the tree before (%d differences):\n%s", len(diffs), strings.Join(diffs, "\n"))
	}
}

// TestJournalUndoBesideAWriter: a file another owner has open for writing
// is left alone by undo (a conflict naming the writer), and that write
// commits as it would have: no version is put back under it.
func TestJournalUndoBesideAWriter(t *testing.T) {
	m := mount(t, Opts("lockowner=session", "journal=on"), Prepare(func(m *Mount) { writeFile(t, m.BackingPath("f"), "before\n") }))
	agent, out := startSession(t, m.Dir, "echo agent > f")
	if err := agent.Wait(); err != nil {
		t.Fatalf("the agent: %v\n%s", err, out)
	}
	f, err := os.OpenFile(m.Path("f"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("writer\n"); err != nil {
		t.Fatal(err)
	}
	got, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	if code != 1 || !strings.Contains(got, "conflict f: f is open for writing by session:") {
		t.Errorf("journal undo beside a writer: exit %d, want 1 and f's conflict:\n%s", code, got)
	}
	if err := f.Close(); err != nil {
		t.Errorf("the writer's close: %v", err)
	}
	if b, _ := os.ReadFile(m.BackingPath("f")); string(b) != "writer\n" {
		t.Errorf("f is %q, want the writer's", b)
	}
}

// TestJournalUndoCoordinated: SQLite's database, written in place by
// every owner (a coordinated file), is recorded (inplace) when an owner
// opens it for writing; undo leaves it as it is and says why.
func TestJournalUndoCoordinated(t *testing.T) {
	requireTool(t, "sqlite3")
	m := mount(t, Opts("lockowner=session", "journal=on"))
	agent, out := startSession(t, m.Dir, "sqlite3 app.db 'CREATE TABLE t(x); INSERT INTO t VALUES(1);'")
	if err := agent.Wait(); err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	got, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	if code != 1 || !strings.Contains(got, "conflict app.db: app.db was written in place (a coordinated file") {
		t.Errorf("journal undo of a SQLite writer: exit %d, want 1 naming app.db written in place:\n%s", code, got)
	}
	if b := run(t, m.Dir, nil, "sqlite3", "app.db", "SELECT x FROM t;"); b != "1\n" {
		t.Errorf("the database after the undo: %q", b)
	}
}

// TestJournalUndoHardLinks: a file whose other name was removed (its link
// kept in the journal) is rewritten by rename, as with no journal, not in
// place: its old version is kept, and undo puts both names back.
func TestJournalUndoHardLinks(t *testing.T) {
	m := mount(t, Opts("lockowner=session", "journal=on"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("a"), "old\n")
		if err := os.Link(m.BackingPath("a"), m.BackingPath("b")); err != nil {
			t.Fatal(err)
		}
	}))
	agent, out := startSession(t, m.Dir, "rm b && echo new > a")
	if err := agent.Wait(); err != nil {
		t.Fatalf("the agent: %v\n%s", err, out)
	}
	got, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	if code != 0 {
		t.Fatalf("journal undo: exit %d\n%s", code, got)
	}
	for _, name := range []string{"a", "b"} {
		if b, err := os.ReadFile(m.BackingPath(name)); err != nil || string(b) != "old\n" {
			t.Errorf("%s after the undo: %q, %v; want old", name, b, err)
		}
	}
}

// TestJournalUndoStaysInBackingWhosePathMoved: a host process that owns
// BACKING's parent renames BACKING away once it is mounted and puts a
// symlink to another directory at its path. The mount, its journal and
// the undo its control socket runs all work beneath the one descriptor of
// BACKING the daemon opened at start: an agent's removal undone through
// the mountpoint is put back in BACKING, and the other directory is not
// written. The swap here comes once the mount is ready; the window it
// closed (the control socket opened BACKING's path again after the mount
// appeared) is kept shut by cmd/realmfs's TestBackingOpenedOnce.
func TestJournalUndoStaysInBackingWhosePathMoved(t *testing.T) {
	m := mount(t, Opts("lockowner=session", "journal=on"), Prepare(func(m *Mount) {
		if err := os.MkdirAll(m.BackingPath("sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.BackingPath("sub/f"), "BACKING's file\n")
	}))
	moved, decoy := m.Backing+".moved", m.Backing+".decoy"
	if err := os.MkdirAll(decoy+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.Backing, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(decoy), m.Backing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the harness's checks read BACKING by its path
		os.Remove(m.Backing)
		os.Rename(moved, m.Backing)
	})
	agent, out := startSession(t, m.Dir, "rm sub/f")
	if err := agent.Wait(); err != nil {
		t.Fatalf("the agent: %v\n%s", err, out)
	}
	got, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	if code != 0 {
		t.Errorf("journal undo: exit %d:\n%s", code, got)
	}
	if _, err := os.Lstat(decoy + "/sub/f"); err == nil {
		t.Errorf("undo put sub/f in the directory BACKING's path leads to now, outside BACKING:\n%s", got)
	}
	if b, err := os.ReadFile(moved + "/sub/f"); err != nil || string(b) != "BACKING's file\n" {
		t.Errorf("sub/f in BACKING after the undo: %q, %v; want it back as it was", b, err)
	}
}

// TestJournalUndoMetadataOnlyOnTheObjectLeft: an agent drops the set-uid
// bit of root's program through the mount; the host then writes new bytes
// into it. Undo does not give those bytes the set-uid bit back: the
// file's ctime is not the one the agent's chmod left (the journal's end
// of a metadata change carries it), a conflict, exit 1, the file as the
// host left it.
func TestJournalUndoMetadataOnlyOnTheObjectLeft(t *testing.T) {
	m := mount(t, Opts("lockowner=session", "journal=on"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("tool"), "real tool\n")
		if err := os.Chmod(m.BackingPath("tool"), 0o4755); err != nil {
			t.Fatal(err)
		}
	}))
	agent, out := startSession(t, m.Dir, "chmod 0755 tool")
	if err := agent.Wait(); err != nil {
		t.Fatalf("the agent: %v\n%s", err, out)
	}
	f, err := os.OpenFile(m.BackingPath("tool"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("the host's bytes\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, code := journalUndo(t, m.Dir, "--owner", "session:"+strconv.Itoa(agent.Process.Pid))
	if code != 1 || !strings.Contains(got, "changed since") {
		t.Errorf("journal undo: exit %d, want 1 and tool's conflict, changed since:\n%s", code, got)
	}
	if fi, err := os.Stat(m.BackingPath("tool")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("tool after the undo: %v, %v; want no set-uid bit", fi.Mode(), err)
	}
}

// TestJournalUndoOneIncarnationOfAnOwner: under lockowner=session an
// owner is named by its session id, the pid of its leader. Once an agent's
// session is over, its id is given to a person's new session (forced with
// ns_last_pid). The journal records each change's incarnation (the
// leader's start), and undo never mixes the two: the bare owner is
// refused, listing both, and nothing is undone; the agent's incarnation,
// named, is undone alone (the person's file stays), its file the person
// appended to after it a conflict as another owner's change is; then the
// person's, named, alone.
func TestJournalUndoOneIncarnationOfAnOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: ns_last_pid needs root")
	}
	m := mount(t, Opts("journal=on", "lockowner=session"))

	agent, out := startSession(t, m.Dir, `echo agent > agent.txt && echo agent > shared.txt`)
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	sid := agent.Process.Pid
	owner := fmt.Sprintf("session:%d", sid)
	person := reuseSession(t, m, sid, `echo "the person's work" > person.txt && echo person >> shared.txt`)
	if person == nil {
		t.Skip("skipped: could not get the agent's pid again")
	}

	starts := incarnationsOf(t, m.Dir, owner)
	agentAt, personAt := starts["agent.txt"], starts["person.txt"]
	if agentAt == "" || personAt == "" || agentAt == personAt {
		t.Fatalf("the incarnations of %s recorded: %v; want two, the agent's and the person's", owner, starts)
	}

	// The bare owner: refused, naming both, nothing undone.
	got, code := journalUndo(t, m.Dir, "--owner", owner)
	t.Logf("undo --owner %s (exit %d):\n%s", owner, code, got)
	if code != 1 || !strings.Contains(got, owner+"@"+agentAt) || !strings.Contains(got, owner+"@"+personAt) || !strings.Contains(got, "Nothing was undone") {
		t.Errorf("undo --owner %s (exit %d), want a refusal (exit 1) naming %s@%s and %s@%s:\n%s", owner, code, owner, agentAt, owner, personAt, got)
	}
	wantFiles(t, m, map[string]string{"agent.txt": "agent\n", "person.txt": "the person's work\n", "shared.txt": "agent\nperson\n"})

	// The agent's: its own file removed, the person's left, the file the
	// person appended to after it a conflict.
	got, code = journalUndo(t, m.Dir, "--owner", owner+"@"+agentAt)
	t.Logf("undo --owner %s@%s (exit %d):\n%s", owner, agentAt, code, got)
	if code != 1 || !strings.Contains(got, "conflict shared.txt: changed by "+owner+"@"+personAt) {
		t.Errorf("undo --owner %s@%s (exit %d), want shared.txt a conflict with the person's incarnation (exit 1):\n%s", owner, agentAt, code, got)
	}
	wantFiles(t, m, map[string]string{"agent.txt": "", "person.txt": "the person's work\n", "shared.txt": "agent\nperson\n"})

	// The person's: its own alone (the agent's undo is another owner's,
	// before it).
	got, code = journalUndo(t, m.Dir, "--owner", owner+"@"+personAt)
	if code != 0 {
		t.Errorf("undo --owner %s@%s (exit %d), want 0:\n%s", owner, personAt, code, got)
	}
	wantFiles(t, m, map[string]string{"agent.txt": "", "person.txt": "", "shared.txt": "agent\n"})
}

// reuseSession starts script in a new session whose leader gets pid sid,
// the id of a session that is over, and waits for it; nil if the pid
// cannot be had again. An attempt that gets another pid runs nothing.
func reuseSession(t *testing.T, m *Mount, sid int, script string) *exec.Cmd {
	for try := 0; try < 50; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(sid-1)), 0); err != nil {
			t.Skipf("skipped: ns_last_pid: %v", err)
		}
		c, out := startSession(t, m.Dir, fmt.Sprintf(`[ $$ -eq %d ] || exit 0; %s`, sid, script))
		err := c.Wait()
		if c.Process.Pid != sid {
			continue
		}
		if err != nil {
			t.Fatalf("session %d: %v\n%s", sid, err, out)
		}
		return c
	}
	return nil
}

// incarnationsOf maps each path owner created (journal list -o json) to
// the incarnation its record holds.
func incarnationsOf(t *testing.T, mnt, owner string) map[string]string {
	t.Helper()
	starts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(realmfsJournal(t, "list", mnt, "--owner", owner, "-o", "json")), "\n") {
		var r struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Start string `json:"owner_start"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("journal list: %q: %v", line, err)
		}
		if r.Op == "create" {
			starts[r.Path] = r.Start
		}
	}
	return starts
}

// wantFiles checks the content of each file in the mount ("": absent).
func wantFiles(t *testing.T, m *Mount, want map[string]string) {
	t.Helper()
	for name, content := range want {
		b, err := os.ReadFile(m.Path(name))
		switch {
		case content == "" && !os.IsNotExist(err):
			t.Errorf("%s: %q, %v; want it absent", name, b, err)
		case content != "" && (err != nil || string(b) != content):
			t.Errorf("%s: %q, %v; want %q", name, b, err, content)
		}
	}
}
