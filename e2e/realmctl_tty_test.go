package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyExpectLimit bounds each wait for output on the terminal: a failure
// bound, not an ordering (every wait ends on the output it waits for).
const ptyExpectLimit = 60 * time.Second

// terminal is realmctl running on a pseudo-terminal, as a person's shell
// would run it.
type terminal struct {
	t    *testing.T
	ptmx *os.File
	cmd  *exec.Cmd
	out  chan []byte
	seen bytes.Buffer // output not yet consumed by expect
	all  bytes.Buffer // everything, for failure messages
}

func startTerminal(t *testing.T, cmd *exec.Cmd, rows, cols uint16) *terminal {
	t.Helper()
	cmd.Env = append(os.Environ(), "TERM=dumb")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: rows, Cols: cols})
	if err != nil {
		t.Fatalf("start realmctl on a pty: %v", err)
	}
	tm := &terminal{t: t, ptmx: ptmx, cmd: cmd, out: make(chan []byte, 64)}
	go func() {
		defer close(tm.out)
		for {
			b := make([]byte, 4096)
			n, err := ptmx.Read(b)
			if n > 0 {
				tm.out <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ptmx.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return tm
}

func (tm *terminal) send(s string) {
	tm.t.Helper()
	if _, err := tm.ptmx.WriteString(s); err != nil {
		tm.t.Fatalf("type %q: %v", s, err)
	}
}

// expect reads the terminal until re matches what came since the last
// match, and returns the submatches.
func (tm *terminal) expect(re *regexp.Regexp) []string {
	tm.t.Helper()
	limit := time.After(ptyExpectLimit)
	for {
		if m := re.FindSubmatchIndex(tm.seen.Bytes()); m != nil {
			var subs []string
			for i := 0; i < len(m); i += 2 {
				subs = append(subs, string(tm.seen.Bytes()[m[i]:m[i+1]]))
			}
			tm.seen.Next(m[1])
			return subs
		}
		select {
		case b, ok := <-tm.out:
			if !ok {
				tm.t.Fatalf("the terminal closed before %q; it showed:\n%s", re, tm.all.String())
			}
			tm.seen.Write(b)
			tm.all.Write(b)
		case <-limit:
			tm.t.Fatalf("no %q on the terminal within %s; it showed:\n%s", re, ptyExpectLimit, tm.all.String())
		}
	}
}

// TestRealmctlExecTerminal: `session exec -it` gives a person a shell in a
// Podman session through a real pseudo-terminal: typed input reaches it,
// its output comes back, its TTY has the terminal's size and follows a
// resize (SIGWINCH), and realmctl exits with the shell's status.
func TestRealmctlExecTerminal(t *testing.T) {
	c := newCtl(t)
	id := c.create(workspace(t))

	tm := startTerminal(t, c.cmd("session", "exec", "-it", "--env", "REALM_TTY_TEST=on", id, "--", "/bin/sh"), 24, 80)
	tm.send("echo $((6*7))\r")
	tm.expect(regexp.MustCompile(`(?m)^42\r?$`))

	tm.send("echo tty=$(tty) env=$REALM_TTY_TEST\r")
	if got := tm.expect(regexp.MustCompile(`tty=(/dev/\S+) env=(\w*)\r`)); !strings.HasPrefix(got[1], "/dev/pts/") || got[2] != "on" {
		t.Errorf("inside: tty=%s env=%s, want a /dev/pts/ TTY and env=on", got[1], got[2])
	}

	sizeRe := regexp.MustCompile(`(?m)^size=(\d+) (\d+)\r?$`)
	tm.send("echo size=$(stty size)\r")
	if got := tm.expect(sizeRe); got[1] != "24" || got[2] != "80" {
		t.Errorf("stty size at start = %s %s, want 24 80", got[1], got[2])
	}

	// Resize the outer terminal: the kernel sends realmctl SIGWINCH, and
	// the exec's TTY must follow. The resize request races the next
	// command, so ask again (each ask waits for its answer) until it shows.
	if err := pty.Setsize(tm.ptmx, &pty.Winsize{Rows: 33, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	resized := false
	for i := 0; i < 50 && !resized; i++ {
		tm.send("echo size=$(stty size)\r")
		got := tm.expect(sizeRe)
		resized = got[1] == "33" && got[2] == "101"
	}
	if !resized {
		t.Errorf("stty size never became 33 101 after the resize; the terminal showed:\n%s", tm.all.String())
	}

	tm.send("exit 7\r")
	err := tm.cmd.Wait()
	if code := tm.cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("realmctl exited %d (%v), want the shell's 7", code, err)
	}
}

// TestRealmctlExecStdinEnvLogsInspect: -i forwards stdin to a captured
// exec, --env reaches the command (and cannot replace realm's marker),
// session logs shows the workload's output and session inspect its live
// state.
func TestRealmctlExecStdinEnvLogsInspect(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	id := c.create(ws, "--", "/bin/sh", "-c", "echo workload-started; exec sleep 1000")

	// -e K without =V passes realmctl's own value of K, as podman does.
	cmd := c.cmd("-o", "json", "session", "exec", "-i", "-e", "A=1", "--env", "B=two words", "-e", "REALM_T_HOSTVAR", id, "--",
		"/bin/sh", "-c", "tr a-z A-Z; echo \"$A/$B/$REALM_T_HOSTVAR\"")
	cmd.Env = append(os.Environ(), "REALM_T_HOSTVAR=from the host")
	cmd.Stdin = strings.NewReader("through stdin\n")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("exec -i: %v: %s", err, out.String())
	}
	var r execResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.ExitCode != 0 || r.Stdout != "THROUGH STDIN\n1/two words/from the host\n" {
		t.Errorf("exec -i --env = %+v (%v), want THROUGH STDIN and 1/two words/from the host", r, err)
	}

	// session logs --follow shows the workload's first line, whenever it
	// comes; realmctl is stopped once it has.
	logs := c.cmd("session", "logs", "--follow", id)
	pipe, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if sc.Text() == "workload-started" {
				found <- true
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Errorf("session logs --follow ended without the workload's line")
		}
	case <-time.After(ptyExpectLimit):
		t.Errorf("session logs --follow showed no workload line within %s", ptyExpectLimit)
	}
	logs.Process.Signal(os.Interrupt)
	logs.Wait()

	// -n counts as podman logs and kubectl logs count: 0 is none of the
	// log (the libpod API alone would answer it with the whole log), 1 the
	// last line.
	for n, want := range map[string]string{"0": "", "1": "workload-started\n", "-1": "workload-started\n"} {
		if so, se, code := c.run("session", "logs", "-n", n, id); code != 0 || so != want {
			t.Errorf("session logs -n %s: exit %d, stdout %q (stderr %q), want %q", n, code, so, se, want)
		}
	}

	so, se, code := c.run("session", "inspect", id)
	var in struct {
		Record struct{ ID string }
		Live   struct{ Sandbox, Mount string }
	}
	if code != 0 || json.Unmarshal([]byte(so), &in) != nil || in.Record.ID != id || in.Live.Sandbox != "running" || in.Live.Mount != "answering" {
		t.Errorf("session inspect exited %d: %s %s", code, so, se)
	}

	// audit: a refused credential read shows up in the session's log.
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("K=V\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.exec(id, "", "/bin/sh", "-c", "cat /workspace/.env")
	ao, ae, code := c.run("-o", "json", "audit", id, "--code", "CREDENTIAL_PATH_DENIED")
	if code != 0 || !strings.Contains(ao, `".env"`) {
		t.Errorf("audit exited %d: stdout %q stderr %q", code, ao, ae)
	}
	// The table names the program, the session (by the container the
	// caller's cgroup owner names) and the rule, under their headers.
	ao, ae, code = c.run("audit", id, "--code", "CREDENTIAL_PATH_DENIED")
	rows := strings.Split(strings.TrimSpace(ao), "\n")
	if code != 0 || len(rows) < 2 {
		t.Fatalf("audit exited %d: stdout %q stderr %q", code, ao, ae)
	}
	// Columns are counted in runes: a shortened cell holds "…".
	head, row := rows[0], []rune(rows[len(rows)-1])
	for col, want := range map[string]string{"PROGRAM": "cat", "SESSION": id, "RULE": "**/.env", "PATH": ".env"} {
		i := strings.Index(head, col) // the header is ASCII
		if i < 0 || len(row) <= i || !strings.HasPrefix(string(row[i:]), want) {
			t.Errorf("audit's %s column does not read %q:\n%s", col, want, ao)
		}
	}
}
