package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-dev/realm/sandbox"
)

// TestReapLeavesOtherStateDirsSessions: sessions of two state dirs on one
// host (REALM_STATE_DIR=/tmp/realm next to the default, root's and a
// user's on one gateway) share the OpenShell gateway (and the Podman
// service), and each state dir tells only its own sessions alive or dead.
// So a reap removes only the sandboxes labelled with its own state dir's
// identity: `realmctl reap` (or the reap every `session create` runs
// first) in state dir B leaves state dir A's live session working, and
// even `reap --all` in B does not touch it.
func TestReapLeavesOtherStateDirsSessions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts realmfs: needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	fake := buildFakeOpenShell(t, bins)
	realmfs := filepath.Join(bins, "realmfs")
	if out, err := exec.Command(goBin, "build", "-o", realmfs, "github.com/realm-dev/realm/cmd/realmfs").CombinedOutput(); err != nil {
		t.Fatalf("build realmfs: %v\n%s", err, out)
	}

	ws := t.TempDir()
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		t.Fatal(err)
	}
	stateA := filepath.Join(t.TempDir(), "a")
	stateB := filepath.Join(t.TempDir(), "b")
	t.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
	t.Setenv("FAKE_OPENSHELL_STATE", filepath.Join(t.TempDir(), "gateway"))
	t.Setenv("FAKE_OPENSHELL_LOG", "")
	t.Setenv("FAKE_OPENSHELL_INTERCEPTOR", "")
	t.Setenv("FAKE_OPENSHELL_ENABLE_BIND_MOUNTS", "1")
	// The operator's gateway shows A's guarded mount at /workspace (what
	// the interceptor would arrange), so A's create proves /workspace.
	t.Setenv("FAKE_OPENSHELL_WORKSPACE", sandbox.NewMounts(stateA, realmfs).Path(ws))

	realmctl := func(state string, args ...string) (string, int) {
		t.Helper()
		all := append([]string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock",
			"--openshell", fake, "--realmfs", realmfs}, args...)
		var out, errOut bytes.Buffer
		code := run(context.Background(), all, &out, &errOut)
		return out.String() + errOut.String(), code
	}
	t.Cleanup(func() { realmctl(stateA, "reap", "--all") })

	out, code := realmctl(stateA, "session", "create", "--runtime", "openshell", "--workspace", ws)
	if code != 0 {
		t.Fatalf("create in A: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	if out, code := realmctl(stateA, "session", "exec", id, "--", "true"); code != 0 {
		t.Fatalf("A's session does not work before B's reap: exit %d: %s", code, out)
	}

	// Another state dir, nothing in it: its reap has nothing of its own.
	reapOut, code := realmctl(stateB, "reap")
	if code != 0 {
		t.Fatalf("reap in B: exit %d: %s", code, reapOut)
	}
	if out, code := realmctl(stateA, "session", "exec", id, "--", "true"); code != 0 {
		t.Fatalf("a reap in state dir B (%q) killed live session %s of state dir A: its exec now exits %d: %s",
			strings.TrimSpace(reapOut), id, code, out)
	}
	if reapOut, code = realmctl(stateB, "reap", "--all"); code != 0 {
		t.Fatalf("reap --all in B: exit %d: %s", code, reapOut)
	}
	if out, code := realmctl(stateA, "session", "exec", id, "--", "true"); code != 0 {
		t.Fatalf("reap --all in state dir B (%q) killed live session %s of state dir A: its exec now exits %d: %s",
			strings.TrimSpace(reapOut), id, code, out)
	}
	// A's own reap --all does remove it.
	if out, code := realmctl(stateA, "reap", "--all"); code != 0 || !strings.Contains(out, "deleted 1 sandboxes") {
		t.Fatalf("reap --all in A: exit %d: %s", code, out)
	}
}
