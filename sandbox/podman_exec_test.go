package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// killCwdSurvivors SIGKILLs, when the test ends, what it left running in wd.
func killCwdSurvivors(t *testing.T, wd string) {
	t.Cleanup(func() {
		for _, pid := range pidsWithCwd(wd) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// startReady starts sh -c script in wd with env, in its own session as runc
// makes an exec's process, and returns once the script printed its first
// line (its tree is in place: an event, not a clock), with a channel closed
// when the process has been waited for.
func startReady(t *testing.T, wd, script string, env []string, setsid bool) <-chan struct{} {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("%q never said it was ready: %v", script, err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	return waited
}

func cmdlines(pids []int) []string {
	var out []string
	for _, pid := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// TestPodmanKillerFollowsScrubbedChildren runs the Podman runtime's
// killerScript (what killTree runs inside the container at the deadline) on
// this host against trees marked the way Podman's exec marks them
// (REALM_EXEC=<token> in the environment, their own session as runc makes
// it). Children that dropped the mark are still killed: as ppid descendants
// of a marked process, or as members of a marked process's session. A
// process of the killer's own session that is not the exec's survives.
func TestPodmanKillerFollowsScrubbedChildren(t *testing.T) {
	for _, bin := range []string{"sh", "setsid", "env", "sleep", "grep"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	quiet := "</dev/null >/dev/null 2>&1"
	tests := []struct{ name, script string }{
		{"scrubbed setsid child of a marked parent",
			`env -u ` + execTokenVar + ` setsid sh -c 'echo ready; exec sleep 1000' &
exec sleep 1000`},
		{"scrubbed grandchild under a scrubbed setsid child",
			`env -u ` + execTokenVar + ` setsid sh -c 'sleep 1000 ` + quiet + ` & echo ready; wait' &
exec sleep 1000`},
		{"scrubbed orphan in a marked process's new session",
			`setsid sh -c '(env -u ` + execTokenVar + ` sleep 1000 ` + quiet + ` &); echo ready; exec sleep 1000' &
exec sleep 1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := execToken()
			if err != nil {
				t.Fatal(err)
			}
			wd, other := t.TempDir(), t.TempDir()
			killCwdSurvivors(t, wd)
			killCwdSurvivors(t, other)
			// A bystander in the killer's own session, unmarked.
			startReady(t, other, "echo ready; exec sleep 1000", nil, false)
			waited := startReady(t, wd, tt.script, []string{execTokenVar + "=" + tok}, true)
			if n := len(livePIDs(pidsWithCwd(wd))); n < 2 {
				t.Fatalf("the tree has %d processes, want at least 2", n)
			}

			killer := exec.Command("/bin/sh", "-c", killerScript, "realm-kill", tok)
			killer.Dir = "/"
			if out, err := killer.CombinedOutput(); err != nil {
				t.Fatalf("killer: %v\n%s", err, out)
			}
			<-waited // the exec's own process is dead: the attach would end now
			if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
				t.Fatalf("the killer exited 0, but %v survive: %q", live, cmdlines(live))
			}
			if live := livePIDs(pidsWithCwd(other)); len(live) != 1 {
				t.Fatalf("the bystander was killed: %v left", live)
			}
		})
	}
}
