package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRealmctlNormalUser runs realmctl as an unprivileged uid (65534) with
// its state under a temp XDG_STATE_HOME: --help, session ls and reap work
// and the state lands there, not in /var/lib/realm.
//
// A rootless Podman cannot run on this CI machine (no subordinate ids for
// 65534, no user session to start podman.socket in), so what is tested of
// Podman is what a user without a running service sees: session create
// fails with REALM_NOT_ACTIVE naming the user's own socket
// ($XDG_RUNTIME_DIR/podman/podman.sock) and how to start it (systemctl
// --user start podman.socket, or podman system service). No podman
// service is needed, so this test runs without one.
func TestRealmctlNormalUser(t *testing.T) {
	realmctlOnce.Do(func() { realmctlBin, realmctlErr = buildRealmctl() })
	if realmctlErr != nil {
		t.Fatalf("building realmctl: %v", realmctlErr)
	}
	// Under baseDir, which uid 65534 can search (t.TempDir's are 0700).
	home, err := os.MkdirTemp(baseDir, "user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	xdgState := filepath.Join(home, ".xdg-state")
	runtimeDir := filepath.Join(home, "run")
	ws := filepath.Join(home, "project")
	for _, d := range []string{runtimeDir, ws} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{home, runtimeDir, ws} {
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + xdgState, "XDG_RUNTIME_DIR=" + runtimeDir, "PATH=/usr/bin:/bin"}
	asUser := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(realmctlBin, args...)
		cmd.Env = env
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("realmctl %v as uid %d: %v", args, nobody, err)
			}
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}

	if out, errOut, code := asUser("--help"); code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "XDG_STATE_HOME") {
		t.Errorf("--help as a user: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := asUser("session", "ls"); code != 0 || !strings.HasPrefix(out, "ID ") {
		t.Errorf("session ls as a user: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := asUser("-o", "json", "reap"); code != 0 || !strings.Contains(out, `"recordsDeleted":0`) {
		t.Errorf("reap as a user: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	state := filepath.Join(xdgState, "realm")
	st, err := os.Stat(filepath.Join(state, "lock"))
	if err != nil {
		t.Fatalf("the state dir's lock is not under XDG_STATE_HOME: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != nobody {
		t.Errorf("%s/lock is owned by %d, want the user %d", state, uid, nobody)
	}

	out, errOut, code := asUser("-o", "json", "session", "create", "--workspace", ws)
	var e struct {
		Error struct{ Code, Message string }
	}
	if code != 69 || json.Unmarshal([]byte(out), &e) != nil || e.Error.Code != "REALM_NOT_ACTIVE" {
		t.Fatalf("session create without a user's podman service: exit %d, stdout %q, stderr %q; want 69 REALM_NOT_ACTIVE", code, out, errOut)
	}
	sock := filepath.Join(runtimeDir, "podman", "podman.sock")
	for _, want := range []string{sock, "systemctl --user start podman.socket", "podman system service --time=0 unix://" + sock} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("create's message %q lacks %q", e.Error.Message, want)
		}
	}
	if recs, _ := filepath.Glob(filepath.Join(state, "sessions", "*.json")); len(recs) != 0 {
		t.Errorf("a failed create left records: %v", recs)
	}
}
