package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// TestExecTimeoutIgnoresPgidFile: realm takes the command's ids from the
// wrapper's start line in its own copy of the stream, never from a file in
// the sandbox's writable tmp. A command that empties that tmp, forges a
// start line with its own mark (it can read it from its environment) and
// runs on is still killed at the deadline, and the kill is confirmed.
func TestExecTimeoutIgnoresPgidFile(t *testing.T) {
	f := newFakeOpenShell(t)
	o := f.runtime(t)
	f.createSandbox(t, "realm-0123456789ab")
	wd := t.TempDir()
	killCwdSurvivors(t, wd)
	tampered := filepath.Join(t.TempDir(), "tampered")

	script := `t=$1 done=$2
rm -f "$t"/realm-exec-* "$t"/*
printf 'realm-exec-%s:start 1 1 1\n' "$` + execTokenVar + `" >&2
: >"$done"
exec sleep 1000`
	_, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{
		Argv:    []string{"sh", "-c", script, "sh", o.RemoteTmp, tampered},
		Workdir: wd,
		Timeout: 3 * time.Second,
	})
	if _, serr := os.Stat(tampered); serr != nil {
		t.Fatalf("the command did not tamper before the deadline (%v); err = %v", serr, err)
	}
	wantCode(t, err, errcode.ToolTimeout)
	if !strings.Contains(err.Error(), "was killed") {
		t.Errorf("err = %v, want a confirmed kill", err)
	}
	if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
		t.Fatalf("exec reported %q, but the command's processes %v are still running", err, live)
	}
}

// TestExecTimeoutWithoutIDsIsUnverified: when realm never read the start
// line (here a shell that drops the wrapper's stderr), the timeout still
// kills by the mark, but says that the kill could not be verified.
func TestExecTimeoutWithoutIDsIsUnverified(t *testing.T) {
	f := newFakeOpenShell(t)
	sh := filepath.Join(t.TempDir(), "sh-no-stderr")
	if err := os.WriteFile(sh, []byte("#!/bin/sh\nexec /bin/sh \"$@\" 2>/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_OPENSHELL_SHELL", sh)
	o := f.runtime(t)
	f.createSandbox(t, "realm-0123456789ab")
	wd := t.TempDir()
	killCwdSurvivors(t, wd)
	_, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{
		Argv: []string{"sleep", "1000"}, Workdir: wd, Timeout: time.Second,
	})
	wantCode(t, err, errcode.ToolTimeout)
	if !strings.Contains(err.Error(), "could not be verified") {
		t.Errorf("err = %v, want an unverified kill", err)
	}
	if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
		t.Fatalf("processes %v survived", live)
	}
}

// TestExecKillsSetsidChildren: a child that left the command's session
// (setsid, and setsid after clearing REALM_EXEC while its parent lives) is
// killed at a timeout and when the command finishes.
func TestExecKillsSetsidChildren(t *testing.T) {
	quiet := "</dev/null >/dev/null 2>&1"
	for _, sh := range shells(t) {
		t.Run("shell="+strings.ReplaceAll(sh, " ", "_"), func(t *testing.T) {
			f := newFakeOpenShell(t)
			t.Setenv("FAKE_OPENSHELL_SHELL", sh)
			o := f.runtime(t)
			f.createSandbox(t, "realm-0123456789ab")

			for _, child := range []string{"setsid", "env -u " + execTokenVar + " setsid"} {
				t.Run("timeout/"+child, func(t *testing.T) {
					wd := t.TempDir()
					killCwdSurvivors(t, wd)
					_, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{
						Argv:    []string{"sh", "-c", child + " sleep 1000 " + quiet + " & exec sleep 1000"},
						Workdir: wd,
						Timeout: 2 * time.Second,
					})
					wantCode(t, err, errcode.ToolTimeout)
					if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
						t.Errorf("TOOL_TIMEOUT (%v), but processes of the command's tree survived: %v", err, live)
					}
				})
			}
			t.Run("finished", func(t *testing.T) {
				wd := t.TempDir()
				killCwdSurvivors(t, wd)
				// The child says on a FIFO when it has its own session;
				// the command ends only then.
				ready := filepath.Join(t.TempDir(), "ready")
				if err := syscall.Mkfifo(ready, 0o600); err != nil {
					t.Fatal(err)
				}
				res, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{
					Argv: []string{"sh", "-c", `setsid sh -c 'echo >"$1"; exec sleep 1000' sh "$1" ` + quiet + ` &
read _ <"$1"
echo started`, "sh", ready},
					Workdir: wd,
					Timeout: 20 * time.Second,
				})
				if err != nil || res.ExitCode != 0 || res.Stdout != "started\n" {
					t.Fatalf("exec = %+v, %v", res, err)
				}
				if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
					t.Errorf("the exec finished (exit 0), but a process of its tree is still running: %v", live)
				}
			})
		})
	}
}

func TestStartWriter(t *testing.T) {
	const nonce = "abc"
	start := "realm-exec-abc:start 10 11 12\n"
	tests := []struct {
		name, in, out string
		ids           execIDs
	}{
		{"start line first", start + "out\nrealm-exec-abc:start 1 1 1\n", "out\nrealm-exec-abc:start 1 1 1\n",
			execIDs{"10", "11", "12", true}},
		{"the CLI's line before it passes", "warning\n" + start + "x", "warning\nx", execIDs{"10", "11", "12", true}},
		{"malformed ids are output", "realm-exec-abc:start 1 x 2\nrest", "realm-exec-abc:start 1 x 2\nrest", execIDs{}},
		{"another nonce is output", "realm-exec-abd:start 1 2 3\n", "realm-exec-abd:start 1 2 3\n", execIDs{}},
		{"no newline yet", "realm-exec-abc:start 1 2", "realm-exec-abc:start 1 2", execIDs{}},
		{"an over-long first line ends the search", strings.Repeat("y", startLineMax+1) + "\n" + start,
			strings.Repeat("y", startLineMax+1) + "\n" + start, execIDs{}},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 1 << 20} {
			var out bytes.Buffer
			w := newStartWriter(&out, nonce)
			for s := tt.in; len(s) > 0; {
				n := min(chunk, len(s))
				if _, err := w.Write([]byte(s[:n])); err != nil {
					t.Fatal(err)
				}
				s = s[n:]
			}
			w.flush()
			if out.String() != tt.out || w.get() != tt.ids {
				t.Errorf("%s, chunk %d: out %q ids %+v, want %q %+v", tt.name, chunk, clip(out.String()), w.get(), clip(tt.out), tt.ids)
			}
		}
	}
}
