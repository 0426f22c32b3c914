package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The OpenShell tests run realmctl on an OpenShell-only host: no Podman
// service answers (--podman-socket names nothing) and the openshell CLI is
// the fake (internal/fakeopenshell), whose gateway side calls realm's
// interceptor the way OpenShell's gateway does (see its doc comment).

var (
	fakeOSOnce sync.Once
	fakeOSBin  string
	fakeOSErr  error
)

// oshost is one OpenShell-only host: a state dir, the fake's state, and,
// if started, the interceptor.
type oshost struct {
	tb       testing.TB
	stateDir string
	env      []string
	sock     string
	fakeDir  string
}

func newOSHost(tb testing.TB, interceptor bool, env ...string) *oshost {
	tb.Helper()
	requireFUSE(tb)
	realmctlOnce.Do(func() { realmctlBin, realmctlErr = buildRealmctl() })
	if realmctlErr != nil {
		tb.Fatalf("building realmctl: %v", realmctlErr)
	}
	fakeOSOnce.Do(func() {
		fakeOSBin, fakeOSErr = goBuild("openshell", "./internal/fakeopenshell", "")
	})
	if fakeOSErr != nil {
		tb.Fatalf("building the fake openshell: %v", fakeOSErr)
	}
	dir := tb.TempDir()
	h := &oshost{tb: tb, stateDir: filepath.Join(dir, "state"), fakeDir: filepath.Join(dir, "fake")}
	h.env = append(os.Environ(),
		"FAKE_OPENSHELL_STATE="+h.fakeDir,
		"FAKE_OPENSHELL_LOG="+filepath.Join(dir, "calls.jsonl"),
		"FAKE_OPENSHELL_ENABLE_BIND_MOUNTS=1",
		"FAKE_OPENSHELL_INTERCEPTOR=",
		"FAKE_OPENSHELL_WORKSPACE=",
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", // no openshell, no podman service needed
	)
	h.env = append(h.env, env...)
	if interceptor {
		h.sock = filepath.Join(dir, "interceptor.sock")
		h.env = append(h.env, "FAKE_OPENSHELL_INTERCEPTOR="+h.sock)
		cmd := exec.Command(realmctlBin, "--state-dir", h.stateDir, "openshell-interceptor", "--listen", "unix://"+h.sock)
		cmd.Env = h.env
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				tb.Errorf("interceptor: %v\n%s", err, errOut.String())
			}
		})
		// Readiness, not timing: wait for the socket to exist.
		for i := 0; ; i++ {
			if st, err := os.Stat(h.sock); err == nil && st.Mode().Type() == os.ModeSocket {
				break
			}
			if i == 500 {
				tb.Fatalf("the interceptor did not listen: %s", errOut.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tb.Cleanup(func() {
		if _, stderr, code := h.run("reap", "--all"); code != 0 {
			tb.Errorf("cleanup: realmctl reap --all exited %d: %s", code, stderr)
		}
	})
	return h
}

func (h *oshost) run(args ...string) (stdout, stderr string, code int) {
	h.tb.Helper()
	all := append([]string{"--state-dir", h.stateDir, "--podman-socket", "unix:///nonexistent/podman.sock", "--openshell", fakeOSBin}, args...)
	cmd := exec.Command(realmctlBin, all...)
	cmd.Env = h.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			h.tb.Fatalf("realmctl %v: %v", args, err)
		}
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func (h *oshost) sandboxes() []string {
	names, _ := filepath.Glob(filepath.Join(h.fakeDir, "realm-*.json"))
	return names
}

// TestOpenShellWorkspaceThroughInterceptor: on a host without Podman,
// session create --runtime openshell (with its reap) works; the interceptor
// made the gateway bind the guarded mount at /workspace, so writes from
// inside land in the workspace and credentials are refused.
func TestOpenShellWorkspaceThroughInterceptor(t *testing.T) {
	h := newOSHost(t, true)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := h.run("session", "create", "--runtime", "openshell", "--workspace", ws, "--", "/bin/sleep", "1000")
	if code != 0 {
		t.Fatalf("session create exited %d: %s %s", code, out, stderr)
	}
	id := strings.TrimSpace(out)

	out, _, code = h.run("session", "exec", "-o", "json", id, "--", "/bin/sh", "-c", "echo hi > /workspace/f && cat /workspace/f; cat /workspace/.env")
	var r execResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exec: %q (%v, exit %d)", out, err, code)
	}
	if r.Stdout != "hi\n" || r.ExitCode == 0 || strings.Contains(r.Stdout+r.Stderr, "s3cr3t") {
		t.Errorf("exec = %+v; want hi, and .env refused", r)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(data) != "hi\n" {
		t.Errorf("workspace f = %q, %v", data, err)
	}
	if left := canaryFiles(ws); len(left) != 0 {
		t.Errorf("canary files left in the workspace: %v", left)
	}

	// The gateway's request carried exactly one bind: this session's mount.
	data, err := os.ReadFile(filepath.Join(h.fakeDir, "realm-"+id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var sb struct {
		Request struct {
			Spec struct {
				Template struct {
					DriverConfig map[string]struct {
						Mounts []map[string]any `json:"mounts"`
					} `json:"driverConfig"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"request"`
	}
	if err := json.Unmarshal(data, &sb); err != nil {
		t.Fatal(err)
	}
	var rec struct{ Mount string }
	recData, _ := os.ReadFile(filepath.Join(h.stateDir, "sessions", id+".json"))
	json.Unmarshal(recData, &rec)
	mounts := sb.Request.Spec.Template.DriverConfig["podman"].Mounts
	if len(sb.Request.Spec.Template.DriverConfig) != 1 || len(mounts) != 1 ||
		mounts[0]["type"] != "bind" || mounts[0]["source"] != rec.Mount || mounts[0]["target"] != "/workspace" || mounts[0]["read_only"] != false {
		t.Errorf("the gateway's driverConfig: %s; want one read-write bind of %s at /workspace", data, rec.Mount)
	}

	out, _, code = h.run("-o", "json", "session", "list")
	if code != 0 || !strings.Contains(out, id) {
		t.Errorf("session list: %d %s", code, out)
	}
	if _, stderr, code := h.run("reap"); code != 0 {
		t.Errorf("reap with a live OpenShell session exited %d: %s", code, stderr)
	}
	// The daemon's own log is kept beside the mount (realmctl passes
	// --log): it says the mount came up, and stays after the session.
	waitForLine(t, rec.Mount+".log", "msg=mounted")
	if out, stderr, code := h.run("session", "destroy", id); code != 0 {
		t.Errorf("destroy exited %d: %s %s", code, out, stderr)
	}
	if len(h.sandboxes()) != 0 {
		t.Errorf("sandboxes left: %v", h.sandboxes())
	}
	waitForLine(t, rec.Mount+".log", "msg=unmounted")
}

// TestOpenShellCanaryRefusesWorkspaceThatIsNotTheMount: without the
// interceptor, /workspace in the sandbox is an empty dir (or, when the
// operator binds the workspace directory itself, the unguarded directory):
// create fails with REALM_NOT_ACTIVE naming what to configure, and leaves
// no session, sandbox or mount.
func TestOpenShellCanaryRefusesWorkspaceThatIsNotTheMount(t *testing.T) {
	tests := []struct {
		name    string
		bare    bool // FAKE_OPENSHELL_WORKSPACE = the workspace dir itself
		message string
	}{
		{"nothing at /workspace", false, "does not show the guarded mount"},
		{"the bare workspace dir at /workspace", true, "without realm's guard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := workspace(t)
			var env []string
			if tt.bare {
				env = append(env, "FAKE_OPENSHELL_WORKSPACE="+ws)
			}
			h := newOSHost(t, false, env...)
			out, _, code := h.run("-o", "json", "session", "create", "--runtime", "openshell", "--workspace", ws)
			var e struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal([]byte(out), &e)
			if code != 69 || e.Error.Code != "REALM_NOT_ACTIVE" || !strings.Contains(e.Error.Message, tt.message) ||
				!strings.Contains(e.Error.Message, "realmctl openshell-interceptor") {
				t.Errorf("create exited %d: %s", code, out)
			}
			if recs, _ := filepath.Glob(filepath.Join(h.stateDir, "sessions", "*.json")); len(recs) != 0 {
				t.Errorf("records left: %v", recs)
			}
			if len(h.sandboxes()) != 0 {
				t.Errorf("sandboxes left: %v", h.sandboxes())
			}
			c := &ctl{tb: t, stateDir: h.stateDir}
			if m := c.realmfsMounts(); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			if left := canaryFiles(ws); len(left) != 0 {
				t.Errorf("canary files left in the workspace: %v", left)
			}
		})
	}
}

// TestOpenShellInterceptorRefusesOtherSandboxesRealmPaths: while a realm
// session runs, a sandbox that is not realm's, created by hand through the
// gateway with --driver-config-json, may not bind the session's workspace
// (BACKING, unguarded), a symlink to it, a directory above it, or the
// state dir; the CLI fails with the gateway's status, and an unrelated
// bind still works. The workspaces come from the session records, so this
// covers realmctl's wiring too.
func TestOpenShellInterceptorRefusesOtherSandboxesRealmPaths(t *testing.T) {
	h := newOSHost(t, true)
	ws := workspace(t)
	out, stderr, code := h.run("session", "create", "--runtime", "openshell", "--workspace", ws, "--", "/bin/sleep", "1000")
	if code != 0 {
		t.Fatalf("session create exited %d: %s %s", code, out, stderr)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { h.run("session", "destroy", id) })

	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	canonWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	const denied = "Error: code: 'The caller does not have permission to execute the specified operation', message: \"realm: sandbox \\\"byhand\\\" may not mount bind "
	tests := []struct {
		source string
		want   string // "" for allowed
	}{
		{ws, denied + ws + " at /data: "},
		{link, denied + link + " at /data: " + link + " (resolved: " + canonWS + ") is a realm workspace"},
		{filepath.Dir(ws), denied + filepath.Dir(ws) + " at /data: "},
		{h.stateDir, denied + h.stateDir + " at /data: "},
		{other, ""},
	}
	for _, tt := range tests {
		dc := `{"podman":{"mounts":[{"type":"bind","source":"` + tt.source + `","target":"/data","read_only":false}]}}`
		cmd := exec.Command(fakeOSBin, "sandbox", "create", "--name", "byhand", "--policy", pol, "--detach", "--driver-config-json", dc)
		cmd.Env = h.env
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		if err == nil {
			del := exec.Command(fakeOSBin, "sandbox", "delete", "byhand")
			del.Env = h.env
			if out, err := del.CombinedOutput(); err != nil {
				t.Fatalf("delete byhand: %v: %s", err, out)
			}
		}
		if tt.want == "" {
			if err != nil {
				t.Errorf("bind of %s: %v: %s", tt.source, err, e.String())
			}
			continue
		}
		if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.HasPrefix(e.String(), tt.want) {
			t.Errorf("bind of %s: %v, stderr\n %s\nwant it to begin\n %s", tt.source, err, e.String(), tt.want)
		}
	}
}

// canaryFiles are the canary's files left in workspace ws (its canary
// and its decoy: sandbox/canary.go); the journal of the session mount's
// changes, .realm-journal, is not one.
func canaryFiles(ws string) []string {
	a, _ := filepath.Glob(filepath.Join(ws, ".realm-canary-*"))
	b, _ := filepath.Glob(filepath.Join(ws, ".realm-tmp-canary-*"))
	return append(a, b...)
}
