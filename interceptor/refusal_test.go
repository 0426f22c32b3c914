package interceptor

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/refusals/*.golden")

// hostSessions is a state dir on a fixture host: one session, whose
// workspace and mountpoint are real directories under root.
type hostSessions struct {
	root string
}

func (h hostSessions) StateDir() string  { return filepath.Join(h.root, "state") }
func (h hostSessions) mnt() string       { return filepath.Join(h.root, "state/mounts/5d1a0e4b7c3f2a19") }
func (h hostSessions) workspace() string { return filepath.Join(h.root, "home/u/ws") }
func (h hostSessions) Workspaces() ([]string, error) {
	return []string{h.workspace(), h.mnt()}, nil
}
func (h hostSessions) Mount(id string) (string, error) {
	if id == testSession {
		return h.mnt(), nil
	}
	return fakeSessions{}.Mount(id)
}

// newHost lays out the fixture under a temp dir (symlinks resolved, so
// the root itself is canonical):
//
//	state/mounts/5d1a0e4b7c3f2a19/   the session's mountpoint
//	home/u/ws/sub/                   the session's workspace (BACKING)
//	home/u/other/                    a directory realm does not guard
//	link-ws -> home/u/ws             a symlink to the workspace
//	link-other -> home/u/other       for link-other/../ws
//	link-fd -> /proc/self/fd/0       a symlink into procfs
//	home/u/other/up -> ../..         a relative symlink, up to home
func newHost(t *testing.T) hostSessions {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state/mounts/5d1a0e4b7c3f2a19", "home/u/ws/sub", "home/u/other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"link-ws":         filepath.Join(root, "home/u/ws"),
		"link-other":      "home/u/other",
		"link-fd":         "/proc/self/fd/0",
		"home/u/other/up": "../..",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return hostSessions{root: root}
}

// createOp is a CreateSandboxRequest as the real CLI sends it for
// `openshell sandbox create --name NAME --driver-config-json '{DRIVER:
// {"mounts": MOUNTS}}'` (crates/openshell-cli/src/run.rs, sandbox_create),
// with realm's labels when realm is set.
func createOp(name string, realm bool, driver string, mounts ...map[string]any) map[string]any {
	ms := make([]any, len(mounts))
	for i, m := range mounts {
		ms[i] = m
	}
	op := map[string]any{
		"name":      name,
		"workspace": "default",
		"spec": map[string]any{
			"policy":   map[string]any{"version": 1.0},
			"template": map[string]any{"driverConfig": map[string]any{driver: map[string]any{"mounts": ms}}},
		},
	}
	if realm {
		op["labels"] = map[string]any{"io.realm.managed": "true", "io.realm.session": testSession}
	}
	return op
}

func bindM(src, target string) map[string]any {
	return map[string]any{"type": "bind", "source": src, "target": target, "read_only": false}
}

func volumeM(src, target string) map[string]any {
	return map[string]any{"type": "volume", "source": src, "target": target}
}

// TestRefusals: every refusal of a host-backed mount, for realm's
// sandboxes and for others, as `openshell sandbox create` prints it (the
// gateway's status, DenialMessage), against a golden in
// testdata/refusals (the fixture's root written as $ROOT). Nothing here
// ran against a real gateway: the format is read from OpenShell's source
// (see DenialMessage) and pinned by TestDenialMessage.
func TestRefusals(t *testing.T) {
	h := newHost(t)
	r := h.root
	ws, mnt := h.workspace(), h.mnt()
	own := bindM(mnt, Workspace)
	tests := []struct {
		name string
		op   map[string]any
	}{
		// realm's own sandboxes: the workspace bind and nothing else.
		{"realm-extra-bind", createOp("realm-"+testSession, true, "podman", own, bindM(filepath.Join(r, "home/u/other"), "/data"))},
		{"realm-named-volume", createOp("realm-"+testSession, true, "podman", own, volumeM("openshell-work", "/data"))},
		{"realm-workspace-dir-not-mount", createOp("realm-"+testSession, true, "podman", bindM(ws, Workspace))},
		// Sandboxes not realm's: nothing of realm's, nothing above it.
		{"root", createOp("demo", false, "podman", bindM("/", "/host"))},
		{"workspace", createOp("demo", false, "podman", bindM(ws, "/data"))},
		{"inside-workspace", createOp("demo", false, "podman", bindM(filepath.Join(ws, "sub"), "/data"))},
		{"ancestor-of-workspace", createOp("demo", false, "podman", bindM(filepath.Join(r, "home"), "/data"))},
		{"ancestor-of-state-dir", createOp("demo", false, "podman", bindM(r, "/data"))},
		{"realm-mount", createOp("demo", false, "podman", bindM(mnt, Workspace))},
		{"symlink-to-workspace", createOp("demo", false, "podman", bindM(filepath.Join(r, "link-ws"), "/data"))},
		{"symlink-dotdot", createOp("demo", false, "podman", bindM(filepath.Join(r, "link-other")+"/../ws", "/data"))},
		{"dotdot", createOp("demo", false, "podman", bindM(filepath.Join(r, "home/u/other")+"/../ws/./sub/", "/data"))},
		{"relative-symlink-above", createOp("demo", false, "podman", bindM(filepath.Join(r, "home/u/other/up"), "/data"))},
		{"proc-self-root-workspace", createOp("demo", false, "podman", bindM("/proc/self/root"+ws, "/data"))},
		{"proc-pid-cwd", createOp("demo", false, "podman", bindM("/proc/1/cwd", "/data"))},
		{"proc-dotdot", createOp("demo", false, "podman", bindM("/tmp/../proc/thread-self/root", "/data"))},
		{"symlink-into-proc", createOp("demo", false, "podman", bindM(filepath.Join(r, "link-fd"), "/data"))},
		{"volume-absolute-source", createOp("demo", false, "podman", volumeM(ws, "/data"))},
		{"docker-block", createOp("demo", false, "docker", bindM(ws, "/data"))},
	}
	svc := &Service{Sessions: h}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Through the wire, as the gateway sends it.
			e := &Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseValidate, Operation: tt.op}
			b, err := e.marshal()
			if err != nil {
				t.Fatal(err)
			}
			var got Evaluation
			if err := got.unmarshal(b); err != nil {
				t.Fatal(err)
			}
			res, err := svc.Evaluate(context.Background(), &got)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				t.Fatalf("allowed")
			}
			msg := strings.ReplaceAll(DenialMessage(res), r, "$ROOT") + "\n"
			file := filepath.Join("testdata", "refusals", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, []byte(msg), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if msg != string(want) {
				t.Errorf("the CLI shows\n %s\nwant\n %s", msg, want)
			}
		})
	}
}

// TestAllowedHostMounts: what the rule leaves alone.
func TestAllowedHostMounts(t *testing.T) {
	h := newHost(t)
	other := filepath.Join(h.root, "home/u/other")
	tests := []struct {
		name string
		op   map[string]any
	}{
		{"realm's own mount", createOp("realm-"+testSession, true, "podman", bindM(h.mnt(), Workspace),
			map[string]any{"type": "tmpfs", "target": "/scratch"},
			map[string]any{"type": "image", "source": "quay.io/example/data:1", "target": "/data"})},
		{"an unguarded dir", createOp("demo", false, "podman", bindM(other, "/data"))},
		{"a sibling whose name extends the workspace's", createOp("demo", false, "podman", bindM(h.workspace()+"2", "/data"))},
		{"tmpfs", createOp("demo", false, "podman", map[string]any{"type": "tmpfs", "target": "/tmp"})},
		{"a named volume", createOp("demo", false, "podman", volumeM("openshell-work", "/data"))},
	}
	svc := &Service{Sessions: h}
	for _, tt := range tests {
		res := svc.evaluate(&Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseValidate, Operation: tt.op})
		if !res.Allowed {
			t.Errorf("%s: denied: %s", tt.name, res.Reason)
		}
	}
}

// TestRefusesBindMountAlias: other paths to the workspace, made with bind
// mounts elsewhere on the host, are the workspace: a bind of it (by device
// and inode), a bind of a directory inside it (by its place in the file
// system, which mountinfo shows), and a directory holding such a mount
// (the driver's bind is recursive).
func TestRefusesBindMountAlias(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	h := newHost(t)
	other := filepath.Join(h.root, "home/u/other")
	whole, part := filepath.Join(other, "whole"), filepath.Join(other, "part")
	bindMount(t, h.workspace(), whole)
	bindMount(t, filepath.Join(h.workspace(), "sub"), part)
	svc := &Service{Sessions: h}
	for _, src := range []string{whole, filepath.Join(whole, "sub"), part, other} {
		res := svc.evaluate(&Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseValidate,
			Operation: createOp("demo", false, "podman", bindM(src, "/data"))})
		if res.Allowed || !strings.Contains(res.Reason, h.workspace()) {
			t.Errorf("bind of %s: allowed %v, %q", src, res.Allowed, res.Reason)
		} else {
			t.Logf("bind of %s: %s", src, res.Reason)
		}
	}
}

// bindMount bind-mounts src at a new directory dst until the test ends.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dst, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dst, err)
		}
	})
}

// TestRefusesWhenSessionsCannotBeListed: fail closed.
func TestRefusesWhenSessionsCannotBeListed(t *testing.T) {
	svc := &Service{Sessions: brokenSessions{}}
	res := svc.evaluate(&Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseValidate,
		Operation: createOp("demo", false, "podman", bindM("/srv/data", "/data"))})
	if res.Allowed || !strings.Contains(res.Reason, "cannot be listed") {
		t.Errorf("allowed %v, %q", res.Allowed, res.Reason)
	}
}

type brokenSessions struct{ fakeSessions }

func (brokenSessions) Workspaces() ([]string, error) { return nil, os.ErrPermission }

// TestDenialMessage pins the gateway's and the CLI's rendering of a
// denial (see DenialMessage for where each part is read from).
func TestDenialMessage(t *testing.T) {
	tests := []struct {
		res  Result
		want string
	}{
		{Result{StatusCode: "PERMISSION_DENIED", Reason: `realm: no "x"`},
			`code: 'The caller does not have permission to execute the specified operation', message: "realm: no \"x\""`},
		{Result{StatusCode: " failed_precondition ", Reason: "a\tb\nc\\d\x00\x7f é"},
			`code: 'The system is not in a state required for the operation's execution', message: "a\tb\nc\\d\0\u{7f} é"`},
		{Result{StatusCode: "NO_SUCH_CODE", Reason: "  "},
			`code: 'The caller does not have permission to execute the specified operation', message: "operation denied by gateway interceptor"`},
	}
	for _, tt := range tests {
		if got := DenialMessage(&tt.res); got != tt.want {
			t.Errorf("DenialMessage(%+v)\n got %s\nwant %s", tt.res, got, tt.want)
		}
	}
}
