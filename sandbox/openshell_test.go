package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/policy"
	"github.com/realm-dev/realm/sandbox/label"
)

// fakeOpenShell is the fake CLI built for one test, with its log and state.
type fakeOpenShell struct {
	bin   string
	log   string
	state string
}

// newFakeOpenShell builds internal/fakeopenshell into the test's temp dir
// and points the fake's environment at files there.
func newFakeOpenShell(t *testing.T) *fakeOpenShell {
	t.Helper()
	dir := t.TempDir()
	f := &fakeOpenShell{
		bin:   fakeOpenShellBin(t),
		log:   filepath.Join(dir, "calls.jsonl"),
		state: filepath.Join(dir, "state"),
	}
	t.Setenv("FAKE_OPENSHELL_LOG", f.log)
	t.Setenv("FAKE_OPENSHELL_STATE", f.state)
	t.Setenv("FAKE_OPENSHELL_FAIL", "")
	t.Setenv("FAKE_OPENSHELL_FAIL_VERB", "")
	t.Setenv("FAKE_OPENSHELL_LIST_CAP", "")
	t.Setenv("FAKE_OPENSHELL_SHELL", "")
	return f
}

// runtime returns an OpenShell runtime on the fake whose exec bookkeeping
// lives in a temp dir of the test (the fake runs commands on this host).
func (f *fakeOpenShell) runtime(t *testing.T) *OpenShell {
	o := NewOpenShell(f.bin)
	o.RemoteTmp = t.TempDir()
	return o
}

type fakeCall struct {
	Args   []string `json:"args"`
	Policy *struct {
		Path   string `json:"path"`
		Exists bool   `json:"exists"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"policy"`
}

// calls returns what the fake logged, in order.
func (f *fakeOpenShell) calls(t *testing.T) []fakeCall {
	t.Helper()
	data, err := os.ReadFile(f.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls []fakeCall
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c fakeCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("fake log line %q: %v", sc.Text(), err)
		}
		calls = append(calls, c)
	}
	return calls
}

// verbs returns the subcommand of each logged call.
func verbs(calls []fakeCall) []string {
	var v []string
	for _, c := range calls {
		if len(c.Args) >= 2 {
			v = append(v, c.Args[1])
		}
	}
	return v
}

// createSandbox creates a sandbox through the fake directly, as another
// user of the gateway would.
func (f *fakeOpenShell) createSandbox(t *testing.T, name string) {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(f.bin, "sandbox", "create", "--name", name, "--policy", pol, "--detach", "--", "/bin/true").CombinedOutput()
	if err != nil {
		t.Fatalf("fake create %s: %v\n%s", name, err, out)
	}
}

func wantCode(t *testing.T, err error, want errcode.Code) {
	t.Helper()
	got, ok := errcode.Of(err)
	if !ok || got != want {
		t.Fatalf("error = %v, want code %s", err, want)
	}
}

func testSpec(t *testing.T, egress []policy.Endpoint) Spec {
	return Spec{
		SessionID:  "0123456789ab",
		Image:      "ghcr.io/nvidia/openshell/sandbox:latest",
		Workspace:  t.TempDir(),
		Workload:   []string{"/usr/local/bin/agent", "--serve"},
		Egress:     egress,
		SessionDir: t.TempDir(),
	}
}

func TestOpenShellArgv(t *testing.T) {
	tests := []struct {
		name string
		call openShellCall
		want []string
	}{
		{
			name: "create with image",
			call: openShellCall{verb: "create", name: "realm-0123456789ab", session: "0123456789ab", policy: "/s/openshell-policy.yaml", image: "registry.example/agent:1", command: []string{"/usr/bin/agent", "--serve"}},
			want: []string{"OS", "sandbox", "create", "--name", "realm-0123456789ab", "--policy", "/s/openshell-policy.yaml", "--label", "io.realm.managed=true", "--label", "io.realm.session=0123456789ab", "--from", "registry.example/agent:1", "--detach", "--no-auto-providers", "--", "/usr/bin/agent", "--serve"},
		},
		{
			name: "create without image",
			call: openShellCall{verb: "create", name: "realm-0123456789ab", session: "0123456789ab", policy: "/s/p.yaml", command: []string{"/bin/sleep", "1"}},
			want: []string{"OS", "sandbox", "create", "--name", "realm-0123456789ab", "--policy", "/s/p.yaml", "--label", "io.realm.managed=true", "--label", "io.realm.session=0123456789ab", "--detach", "--no-auto-providers", "--", "/bin/sleep", "1"},
		},
		{
			name: "create with the state dir's label",
			call: openShellCall{verb: "create", name: "realm-0123456789ab", session: "0123456789ab", state: "0123456789abcdef", policy: "/s/p.yaml", command: []string{"/bin/sleep", "1"}},
			want: []string{"OS", "sandbox", "create", "--name", "realm-0123456789ab", "--policy", "/s/p.yaml", "--label", "io.realm.managed=true", "--label", "io.realm.session=0123456789ab", "--label", "io.realm.state=0123456789abcdef", "--detach", "--no-auto-providers", "--", "/bin/sleep", "1"},
		},
		{
			name: "get",
			call: openShellCall{verb: "get", name: "realm-0123456789ab"},
			want: []string{"OS", "sandbox", "get", "realm-0123456789ab", "-o", "json"},
		},
		{
			name: "exec with workdir",
			call: openShellCall{verb: "exec", name: "realm-0123456789ab", workdir: "/workspace/src", command: []string{"/bin/sh", "-c", "x"}},
			want: []string{"OS", "sandbox", "exec", "-n", "realm-0123456789ab", "--no-tty", "--workdir", "/workspace/src", "--", "/bin/sh", "-c", "x"},
		},
		{
			name: "exec without workdir",
			call: openShellCall{verb: "exec", name: "realm-0123456789ab", command: []string{"ls", "--env"}},
			want: []string{"OS", "sandbox", "exec", "-n", "realm-0123456789ab", "--no-tty", "--", "ls", "--env"},
		},
		{
			name: "delete",
			call: openShellCall{verb: "delete", name: "realm-0123456789ab"},
			want: []string{"OS", "sandbox", "delete", "realm-0123456789ab"},
		},
		{
			name: "list",
			call: openShellCall{verb: "list", limit: 1000, offset: 2000},
			want: []string{"OS", "sandbox", "list", "-o", "json", "--limit", "1000", "--offset", "2000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := buildOpenShellArgv("OS", tt.call)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("argv\n got %q\nwant %q", got, tt.want)
			}
			assertNoForbidden(t, got)
		})
	}
}

// assertNoForbidden checks the CLI's own arguments (up to "--") of argv.
func assertNoForbidden(t *testing.T, argv []string) {
	t.Helper()
	for _, a := range argv[1:] {
		if a == "--" {
			return
		}
		for _, f := range openShellForbidden {
			if a == f || strings.HasPrefix(a, f+"=") {
				t.Fatalf("argv %q carries forbidden %s", argv, f)
			}
		}
	}
}

func TestOpenShellArgvGuardRefusesForbidden(t *testing.T) {
	if len(openShellForbidden) != 7 {
		t.Fatalf("forbidden list changed: %q", openShellForbidden)
	}
	for _, f := range openShellForbidden {
		for _, form := range [][]string{
			{"OS", "sandbox", "create", "--name", "realm-x", f, "v", "--", "/bin/true"},
			{"OS", "sandbox", "create", "--name", "realm-x", f + "=v", "--", "/bin/true"},
			{"OS", "sandbox", "exec", "-n", "realm-x", f},
		} {
			err := checkOpenShellArgv(form)
			wantCode(t, err, errcode.SchemaInvalid)
		}
		// After the separator the words are the remote command's.
		if err := checkOpenShellArgv([]string{"OS", "sandbox", "exec", "-n", "realm-x", "--", "git", f}); err != nil {
			t.Fatalf("%s after --: %v", f, err)
		}
	}
	// A value may not start with "-", so nothing can smuggle a flag in.
	for _, c := range []openShellCall{
		{verb: "create", name: "realm-x", policy: "/p", image: "--env=A=B", command: []string{"/bin/true"}},
		{verb: "create", name: "realm-x", policy: "--provider=p", command: []string{"/bin/true"}},
		{verb: "exec", name: "realm-x", workdir: "--forward=8080", command: []string{"true"}},
		{verb: "delete", name: "--all"},
		{verb: "get", name: "Realm_X"},
		{verb: "exec", name: "realm-x"},
		{verb: "create", name: "realm-x", command: []string{"/bin/true"}},
		{verb: "connect", name: "realm-x"},
	} {
		if _, err := buildOpenShellArgv("OS", c); err == nil {
			t.Errorf("buildOpenShellArgv(%+v) built an argv", c)
		}
	}
}

func TestOpenShellCreateWritesPolicyBeforeCreate(t *testing.T) {
	f := newFakeOpenShell(t)
	o := f.runtime(t)
	egress := []policy.Endpoint{{Host: "api.github.com", Port: 443}, {Host: "*.pypi.org", Port: 443}, {Host: "10.0.0.7", Port: 8080}}
	spec := testSpec(t, egress)

	name, err := o.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if name != "realm-0123456789ab" {
		t.Fatalf("name = %q", name)
	}

	path := filepath.Join(spec.SessionDir, OpenShellPolicyFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := policy.OpenShellDocument("/workspace", egress, "/usr/local/bin/agent")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("policy on disk is not the rendered document:\n%s", data)
	}
	var doc struct {
		Version          int `yaml:"version"`
		FilesystemPolicy struct {
			ReadOnly  []string `yaml:"read_only"`
			ReadWrite []string `yaml:"read_write"`
		} `yaml:"filesystem_policy"`
		Landlock struct {
			Compatibility string `yaml:"compatibility"`
		} `yaml:"landlock"`
		Process struct {
			RunAsUser  string `yaml:"run_as_user"`
			RunAsGroup string `yaml:"run_as_group"`
		} `yaml:"process"`
		NetworkPolicies map[string]struct {
			Endpoints []struct {
				Host        string `yaml:"host"`
				Port        int    `yaml:"port"`
				Enforcement string `yaml:"enforcement"`
			} `yaml:"endpoints"`
			Binaries []struct {
				Path string `yaml:"path"`
			} `yaml:"binaries"`
		} `yaml:"network_policies"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || doc.Landlock.Compatibility != "hard_requirement" ||
		doc.Process.RunAsUser != "sandbox" || doc.Process.RunAsGroup != "sandbox" {
		t.Fatalf("policy header wrong: %+v", doc)
	}
	// The exec wrapper needs a writable /tmp; the workload the workspace.
	for _, p := range []string{"/workspace", "/tmp"} {
		if !slices.Contains(doc.FilesystemPolicy.ReadWrite, p) {
			t.Errorf("read_write %q lacks %s", doc.FilesystemPolicy.ReadWrite, p)
		}
	}
	if len(doc.NetworkPolicies) != 1 {
		t.Fatalf("network_policies = %+v, want one rule", doc.NetworkPolicies)
	}
	for _, rule := range doc.NetworkPolicies {
		if len(rule.Binaries) != 1 || rule.Binaries[0].Path != "/usr/local/bin/agent" {
			t.Errorf("binaries = %+v, want exactly the workload binary", rule.Binaries)
		}
		if len(rule.Endpoints) != len(egress) {
			t.Fatalf("endpoints = %+v", rule.Endpoints)
		}
		for i, e := range rule.Endpoints {
			if e.Host != egress[i].Host || e.Port != egress[i].Port || e.Enforcement != "enforce" {
				t.Errorf("endpoint %d = %+v, want %v enforced", i, e, egress[i])
			}
		}
	}

	// The fake saw the complete file at the moment of the create.
	calls := f.calls(t)
	if got := verbs(calls); !reflect.DeepEqual(got, []string{"create", "get"}) {
		t.Fatalf("calls = %q", got)
	}
	sum := sha256.Sum256(data)
	pc := calls[0].Policy
	if pc == nil || !pc.Exists || pc.Path != path || pc.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("at create the policy file was %+v, want %s with sha256 %x", pc, path, sum)
	}
	wantArgs := []string{"sandbox", "create", "--name", "realm-0123456789ab", "--policy", path,
		"--label", "io.realm.managed=true", "--label", "io.realm.session=0123456789ab", "--from", spec.Image, "--detach", "--no-auto-providers", "--", "/usr/local/bin/agent", "--serve"}
	if !reflect.DeepEqual(calls[0].Args, wantArgs) {
		t.Fatalf("create args\n got %q\nwant %q", calls[0].Args, wantArgs)
	}
	// No temp file is left beside the document.
	ents, err := os.ReadDir(spec.SessionDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("session dir holds %d entries, want only the policy", len(ents))
	}
}

func TestOpenShellCreateWithoutEgressHasNoNetworkRule(t *testing.T) {
	f := newFakeOpenShell(t)
	o := f.runtime(t)
	spec := testSpec(t, nil)
	spec.Image = ""
	if _, err := o.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(spec.SessionDir, OpenShellPolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["network_policies"]; ok {
		t.Fatalf("no egress but a network rule:\n%s", data)
	}
	if c := f.calls(t)[0]; slices.Contains(c.Args, "--from") {
		t.Fatalf("no image but --from: %q", c.Args)
	}
}

// TestOpenShellInvalidEgressMakesNoCall: an invalid allowlist stops the
// create path before a runtime is even made (sandbox.Validate runs
// policy.ParseEgress), and an endpoint that bypassed the parser stops
// Create before anything is written or run.
func TestOpenShellInvalidEgressMakesNoCall(t *testing.T) {
	f := newFakeOpenShell(t)
	for _, bad := range [][]string{
		{"https://api.github.com"},
		{"api.github.com/repos"},
		{"api.github.com:0"},
		{"api.github.com:65536"},
		{"api.*.com"},
		{"bad_host.example"},
		{"api.github.com", "api.github.com:443"},
		{""},
	} {
		_, err := Validate(CreateRequest{Runtime: "openshell", Workspace: t.TempDir(), Egress: bad, User: "1000"})
		wantCode(t, err, errcode.SchemaInvalid)
	}

	o := f.runtime(t)
	for _, bad := range [][]policy.Endpoint{
		{{Host: "bad host", Port: 443}},
		{{Host: "api.github.com", Port: 0}},
		{{Host: "a.example", Port: 443}, {Host: "a.example", Port: 443}},
	} {
		spec := testSpec(t, bad)
		_, err := o.Create(context.Background(), spec)
		wantCode(t, err, errcode.SchemaInvalid)
		if _, err := os.Stat(filepath.Join(spec.SessionDir, OpenShellPolicyFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a policy file was written for invalid egress %v", bad)
		}
	}
	// A workload that is not absolute, an image that would be read as a
	// flag: refused before anything happens, too.
	spec := testSpec(t, nil)
	spec.Workload = []string{"agent"}
	_, err := o.Create(context.Background(), spec)
	wantCode(t, err, errcode.SchemaInvalid)
	spec = testSpec(t, nil)
	spec.Image = "--env=TOKEN=x"
	_, err = o.Create(context.Background(), spec)
	wantCode(t, err, errcode.SchemaInvalid)
	if _, err := os.Stat(filepath.Join(spec.SessionDir, OpenShellPolicyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a policy file was written for a refused argv")
	}

	if calls := f.calls(t); len(calls) != 0 {
		t.Fatalf("the fake was called %d times: %q", len(calls), verbs(calls))
	}
}

// shells are the sh implementations the exec wrapper must work with: the
// host's /bin/sh, and busybox sh as in a minimal image.
func shells(t *testing.T) []string {
	s := []string{""}
	if _, err := exec.LookPath("busybox"); err == nil {
		s = append(s, "busybox sh")
	} else {
		t.Log("busybox not installed: the wrapper is tested with /bin/sh only")
	}
	return s
}

func TestOpenShellExec(t *testing.T) {
	wd := t.TempDir()
	tests := []struct {
		name    string
		req     ExecRequest
		want    ExecResult
		wantErr errcode.Code
	}{
		{name: "stdout", req: ExecRequest{Argv: []string{"echo", "hi"}}, want: ExecResult{Stdout: "hi\n"}},
		{name: "exit 3 is a result", req: ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			want: ExecResult{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{name: "exit 1 is the command's, not the CLI's", req: ExecRequest{Argv: []string{"sh", "-c", "exit 1"}},
			want: ExecResult{ExitCode: 1}},
		{name: "stderr without newline", req: ExecRequest{Argv: []string{"sh", "-c", "printf x >&2"}},
			want: ExecResult{Stderr: "x"}},
		{name: "a forged early marker stays output", req: ExecRequest{Argv: []string{"sh", "-c", "echo realm-exec-0:7 >&2; exit 2"}},
			want: ExecResult{ExitCode: 2, Stderr: "realm-exec-0:7\n"}},
		{name: "workdir", req: ExecRequest{Argv: []string{"pwd"}, Workdir: wd}, want: ExecResult{Stdout: wd + "\n"}},
		// The fake maps /workspace in the command's words and in --workdir
		// to the sandbox's workspace dir on the host.
		{name: "no workdir runs in /workspace", req: ExecRequest{Argv: []string{"sh", "-c", `test "$(pwd)" = /workspace && echo in-workspace`}},
			want: ExecResult{Stdout: "in-workspace\n"}},
		{name: "killed by a signal", req: ExecRequest{Argv: []string{"sh", "-c", "kill -9 $$"}}, want: ExecResult{ExitCode: 137}},
		{name: "background child does not outlive the command", req: ExecRequest{Argv: []string{"sh", "-c", "sleep 1000 & echo started"}, Timeout: 20 * time.Second},
			want: ExecResult{Stdout: "started\n"}},
		{name: "bounded capture", req: ExecRequest{Argv: []string{"sh", "-c", "head -c 1048576 /dev/zero; head -c 307200 /dev/zero >&2"}},
			want: ExecResult{Stdout: strings.Repeat("\x00", CaptureLimit), Stderr: strings.Repeat("\x00", CaptureLimit), StdoutTruncated: true, StderrTruncated: true}},
		{name: "exactly the limit is not truncated", req: ExecRequest{Argv: []string{"sh", "-c", "head -c 262144 /dev/zero >&2"}},
			want: ExecResult{Stderr: strings.Repeat("\x00", CaptureLimit)}},
		{name: "no such sandbox", req: ExecRequest{Argv: []string{"true"}}, wantErr: errcode.RealmNotActive},
	}
	for _, sh := range shells(t) {
		t.Run("shell="+strings.ReplaceAll(sh, " ", "_"), func(t *testing.T) {
			f := newFakeOpenShell(t)
			t.Setenv("FAKE_OPENSHELL_SHELL", sh)
			o := f.runtime(t)
			f.createSandbox(t, "realm-0123456789ab")
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					name := "realm-0123456789ab"
					if tt.wantErr != "" {
						name = "realm-gone"
					}
					got, err := o.Exec(context.Background(), name, tt.req)
					if tt.wantErr != "" {
						wantCode(t, err, tt.wantErr)
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if got.ExitCode != tt.want.ExitCode || got.StdoutTruncated != tt.want.StdoutTruncated ||
						got.StderrTruncated != tt.want.StderrTruncated || got.Stdout != tt.want.Stdout || got.Stderr != tt.want.Stderr {
						t.Fatalf("result = exit %d out %q (%d bytes, trunc %v) err %q (%d bytes, trunc %v), want %+v",
							got.ExitCode, clip(got.Stdout), len(got.Stdout), got.StdoutTruncated,
							clip(got.Stderr), len(got.Stderr), got.StderrTruncated, tt.want.ExitCode)
					}
				})
			}
			for _, c := range f.calls(t) {
				assertNoForbidden(t, append([]string{f.bin}, c.Args...))
			}
			// Every exec bookkeeping file was cleaned up.
			if ents, _ := os.ReadDir(o.RemoteTmp); len(ents) != 0 {
				t.Fatalf("exec left %d files in the sandbox's tmp", len(ents))
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func TestOpenShellExecTimeoutKillsProcessGroup(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run("shell="+strings.ReplaceAll(sh, " ", "_"), func(t *testing.T) {
			f := newFakeOpenShell(t)
			t.Setenv("FAKE_OPENSHELL_SHELL", sh)
			o := f.runtime(t)
			f.createSandbox(t, "realm-0123456789ab")
			// The command's processes are found by their working
			// directory, which no other process on the host has.
			wd := t.TempDir()

			var (
				mu     sync.Mutex
				groups = map[int]bool{}
				stop   = make(chan struct{})
				polled = make(chan struct{})
			)
			go func() {
				defer close(polled)
				for {
					for _, pid := range pidsWithCwd(wd) {
						if pg, err := syscall.Getpgid(pid); err == nil {
							mu.Lock()
							groups[pg] = true
							mu.Unlock()
						}
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()

			start := time.Now()
			_, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{
				Argv:    []string{"sh", "-c", "sleep 1000 & sleep 1000"},
				Workdir: wd,
				Timeout: 2 * time.Second,
			})
			elapsed := time.Since(start)
			close(stop)
			<-polled
			wantCode(t, err, errcode.ToolTimeout)
			if elapsed < 2*time.Second || elapsed > 30*time.Second {
				t.Fatalf("exec returned after %s", elapsed)
			}
			if len(groups) == 0 {
				t.Fatal("never saw the command's processes")
			}
			// No process of the command's group survives; zombies are
			// dead, they only wait to be reaped by the host's init.
			for pg := range groups {
				if live := liveInGroup(pg); len(live) > 0 {
					t.Errorf("process group %d survived: pids %v", pg, live)
				}
			}
			if live := livePIDs(pidsWithCwd(wd)); len(live) > 0 {
				t.Errorf("processes in %s survived: %v", wd, live)
			}
			if got := verbs(f.calls(t)); !reflect.DeepEqual(got, []string{"create", "exec", "exec", "exec"}) {
				t.Fatalf("calls = %q, want the command, the kill and the check", got)
			}
		})
	}
}

// TestOpenShellExecCLITimeoutLeavesRunning shows why realm kills the group
// itself: the CLI's own --timeout answers 124 and leaves the command running.
func TestOpenShellExecCLITimeoutLeavesRunning(t *testing.T) {
	f := newFakeOpenShell(t)
	f.createSandbox(t, "realm-0123456789ab")
	wd := t.TempDir()
	cmd := exec.Command(f.bin, "sandbox", "exec", "-n", "realm-0123456789ab", "--workdir", wd, "--timeout", "1", "--", "sleep", "1000")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 124 {
		t.Fatalf("fake exec --timeout: %v, want exit 124", err)
	}
	pids := livePIDs(pidsWithCwd(wd))
	if len(pids) == 0 {
		t.Fatal("the fake killed the command at its --timeout; the real CLI does not")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestOpenShellNotActive(t *testing.T) {
	ops := []struct {
		name string
		do   func(o *OpenShell, spec Spec) error
	}{
		{"create", func(o *OpenShell, spec Spec) error { _, err := o.Create(context.Background(), spec); return err }},
		{"exec", func(o *OpenShell, _ Spec) error {
			_, err := o.Exec(context.Background(), "realm-0123456789ab", ExecRequest{Argv: []string{"true"}, Timeout: 10 * time.Second})
			return err
		}},
		{"destroy", func(o *OpenShell, _ Spec) error { return o.Destroy(context.Background(), "realm-0123456789ab") }},
		{"list", func(o *OpenShell, _ Spec) error { _, err := o.ListRealmSandboxes(context.Background()); return err }},
		{"running", func(o *OpenShell, _ Spec) error {
			_, err := o.Running(context.Background(), "realm-0123456789ab")
			return err
		}},
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, f *fakeOpenShell, o *OpenShell)
	}{
		{"gateway down", func(t *testing.T, f *fakeOpenShell, o *OpenShell) { t.Setenv("FAKE_OPENSHELL_FAIL", "1") }},
		{"CLI missing", func(t *testing.T, f *fakeOpenShell, o *OpenShell) { o.Bin = filepath.Join(t.TempDir(), "openshell") }},
		{"CLI hangs", func(t *testing.T, f *fakeOpenShell, o *OpenShell) {
			script := filepath.Join(t.TempDir(), "openshell")
			if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 1000\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			o.Bin = script
			o.CreateTimeout, o.CallTimeout = 300*time.Millisecond, 300*time.Millisecond
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeOpenShell(t)
			f.createSandbox(t, "realm-0123456789ab")
			o := f.runtime(t)
			c.setup(t, f, o)
			for _, op := range ops {
				if c.name == "CLI hangs" && op.name == "exec" {
					continue // a hanging exec is a timeout, tested above
				}
				err := op.do(o, testSpec(t, nil))
				wantCode(t, err, errcode.RealmNotActive)
				if strings.Contains(err.Error(), "gateway") {
					t.Errorf("%s: the CLI's stderr became the message: %v", op.name, err)
				}
			}
		})
	}
}

func TestOpenShellDestroy(t *testing.T) {
	f := newFakeOpenShell(t)
	o := f.runtime(t)
	ctx := context.Background()
	spec := testSpec(t, nil)
	name, err := o.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := o.Running(ctx, name); err != nil || !ok {
		t.Fatalf("Running = %v, %v after create", ok, err)
	}
	if err := o.Destroy(ctx, name); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.Running(ctx, name); err != nil || ok {
		t.Fatalf("Running = %v, %v after destroy", ok, err)
	}
	// Already gone counts as deleted (session teardown destroys twice).
	if err := o.Destroy(ctx, name); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	_, err = o.Exec(ctx, name, ExecRequest{Argv: []string{"true"}})
	wantCode(t, err, errcode.RealmNotActive)

	// A delete the CLI fails is still success when a list shows the
	// sandbox gone, and an error when it is still there.
	t.Setenv("FAKE_OPENSHELL_FAIL_VERB", "delete")
	if err := o.DeleteSandbox(ctx, name); err != nil {
		t.Fatalf("delete of a gone sandbox with a failing CLI: %v", err)
	}
	f.createSandbox(t, "realm-aaaaaaaaaaaa")
	wantCode(t, o.DeleteSandbox(ctx, "realm-aaaaaaaaaaaa"), errcode.RealmNotActive)

	// Never a sandbox realm did not create.
	before := len(f.calls(t))
	for _, foreign := range []string{"other-x", "realm-", "--all", "realm-X"} {
		wantCode(t, o.DeleteSandbox(ctx, foreign), errcode.SchemaInvalid)
	}
	if after := len(f.calls(t)); after != before {
		t.Fatalf("refused deletes made %d calls", after-before)
	}
}

func TestOpenShellListRealmSandboxes(t *testing.T) {
	f := newFakeOpenShell(t)
	o := f.runtime(t)
	ctx := context.Background()
	if names, err := o.ListRealmSandboxes(ctx); err != nil || len(names) != 0 {
		t.Fatalf("empty gateway: %q, %v", names, err)
	}
	for _, n := range []string{"realm-bbbbbbbbbbbb", "other-x", "realm-aaaaaaaaaaaa", "my-realm-1", "zeta"} {
		f.createSandbox(t, n)
	}
	// A gateway that caps pages at 2 still yields every sandbox.
	t.Setenv("FAKE_OPENSHELL_LIST_CAP", "2")
	names, err := o.ListRealmSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"realm-aaaaaaaaaaaa", "realm-bbbbbbbbbbbb"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %q, want %q", names, want)
	}
	var s SandboxSweeper = o
	swept, err := s.ListSandboxes(ctx)
	if err != nil || len(swept) != len(names) {
		t.Fatalf("ListSandboxes = %v, %v", swept, err)
	}
	for i, sb := range swept {
		if sb.Name != names[i] || sb.State != "" {
			t.Errorf("ListSandboxes[%d] = %+v, want %s with no state label", i, sb, names[i])
		}
	}
}

func TestMarkerWriter(t *testing.T) {
	prefix := "realm-exec-abc:"
	tests := []struct {
		in         string
		wantOut    string
		wantStatus string
		wantOK     bool
	}{
		{"", "", "", false},
		{"realm-exec-abc:0\n", "", "0", true},
		{"hello\nrealm-exec-abc:3\n", "hello\n", "3", true},
		{"no newline" + "realm-exec-abc:12\n", "no newline", "12", true},
		{strings.Repeat("y", 1000) + "realm-exec-abc:0\n", strings.Repeat("y", 1000), "0", true},
		{"realm-exec-abc:0\ntrailing", "realm-exec-abc:0\ntrailing", "", false},
		{"realm-exec-abc:0", "realm-exec-abc:0", "", false},
		{"realm-exec-xyz:0\n", "realm-exec-xyz:0\n", "", false},
		{"realm-exec-abc:\n", "realm-exec-abc:\n", "", false},
		{"realm-exec-abc:1\nrealm-exec-abc:nosetsid\n", "realm-exec-abc:1\n", "nosetsid", true},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 7, 4096} {
			var out bytes.Buffer
			w := &markerWriter{dst: &out, prefix: []byte(prefix)}
			for s := tt.in; s != ""; {
				n := min(chunk, len(s))
				if _, err := w.Write([]byte(s[:n])); err != nil {
					t.Fatal(err)
				}
				s = s[n:]
			}
			status, ok := w.finish()
			if out.String() != tt.wantOut || status != tt.wantStatus || ok != tt.wantOK {
				t.Errorf("in %q chunk %d: out %q status %q ok %v, want %q %q %v",
					clip(tt.in), chunk, clip(out.String()), status, ok, clip(tt.wantOut), tt.wantStatus, tt.wantOK)
			}
		}
	}
}

// pidsWithCwd lists the processes whose working directory is dir.
func pidsWithCwd(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procState returns the state letter and process group of pid.
func procState(pid int) (state string, pgrp int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 3 {
		return "", 0, false
	}
	pg, err := strconv.Atoi(fields[2])
	if err != nil {
		return "", 0, false
	}
	return fields[0], pg, true
}

// livePIDs keeps the pids that are alive and not zombies.
func livePIDs(pids []int) []int {
	var live []int
	for _, pid := range pids {
		if st, _, ok := procState(pid); ok && st != "Z" {
			live = append(live, pid)
		}
	}
	return live
}

// liveInGroup lists the live, non-zombie processes of process group pg.
func liveInGroup(pg int) []int {
	if err := syscall.Kill(-pg, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var live []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, g, ok := procState(pid); ok && g == pg && st != "Z" {
			live = append(live, pid)
		}
	}
	return live
}

// TestOpenShellStateLabel: a runtime made for a state dir labels its
// sandboxes with the dir's identity, and the sweep's list reads it back;
// a state label that is not an id is refused before the CLI runs.
func TestOpenShellStateLabel(t *testing.T) {
	f := newFakeOpenShell(t)
	rt, err := openShellFactory(f.bin)(context.Background(), RuntimeOptions{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	o := rt.(*OpenShell)
	o.RemoteTmp = t.TempDir()
	if !label.ValidStateID(o.StateLabel) {
		t.Fatalf("StateLabel = %q", o.StateLabel)
	}
	f.createSandbox(t, "realm-bbbbbbbbbbbb") // an older realmctl's: no label
	if _, err := o.Create(context.Background(), testSpec(t, nil)); err != nil {
		t.Fatal(err)
	}
	got, err := o.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []label.Sandbox{{Name: "realm-0123456789ab", State: o.StateLabel}, {Name: "realm-bbbbbbbbbbbb"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListSandboxes = %+v, want %+v", got, want)
	}
	if _, err := buildOpenShellArgv("OS", openShellCall{verb: "create", name: "realm-0123456789ab", session: "0123456789ab", state: "../x", policy: "/p", command: []string{"/x"}}); err == nil {
		t.Fatal("a state label that is no id was passed")
	}
}
