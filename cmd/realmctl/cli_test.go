package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/sandbox"
)

// TestAliases: each alias reaches its command.
func TestAliases(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"session", "ls"}, "session list"},
		{[]string{"sessions", "list"}, "session list"},
		{[]string{"session", "rm", "abc"}, "session destroy"},
		{[]string{"session", "delete", "abc"}, "session destroy"},
		{[]string{"session", "new", "--workspace", "/ws"}, "session create"},
		{[]string{"session", "run", "abc", "--", "true"}, "session exec"},
	}
	for _, tt := range tests {
		p, err := parseCommandLine(tt.args)
		if err != nil {
			t.Errorf("parse %q: %v", tt.args, err)
			continue
		}
		if p.cmd == nil || words(p.cmd) != tt.want {
			t.Errorf("parse %q: reached %v, want %s", tt.args, p.cmd, tt.want)
		}
	}
}

// TestUsageErrors: a command line that does not parse exits 2 with a
// suggestion for a typo, and is USAGE, not SCHEMA_INVALID, in JSON.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"sesion", "list"}, "Did you mean this?\n\tsession"},
		{[]string{"session", "lst"}, "Did you mean this?\n\tlist"},
		{[]string{"session", "exce", "abc", "--", "true"}, "Did you mean this?\n\texec"},
		{[]string{"session"}, "session needs a subcommand"},
		{[]string{"session", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"session", "exec", "abc", "--timeout", "soon", "--", "true"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"reap", "--al"}, "unknown flag: --al"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tt.args, &out, &errOut); code != 2 {
			t.Errorf("%q exited %d, want 2", tt.args, code)
		}
		if !strings.Contains(errOut.String(), tt.wantStderr) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, errOut.String(), tt.wantStderr)
		}
		if strings.Contains(errOut.String(), "SCHEMA_INVALID") {
			t.Errorf("%q: a usage error reported as SCHEMA_INVALID: %q", tt.args, errOut.String())
		}
		out.Reset()
		run(context.Background(), append([]string{"-o", "json"}, tt.args...), &out, &errOut)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Error.Code != "USAGE" || e.Error.Message == "" {
			t.Errorf("%q -o json printed %q, want code USAGE", tt.args, out.String())
		}
	}
}

func TestVersion(t *testing.T) {
	old := version
	version = "1.2.3-test"
	defer func() { version = old }()
	for _, args := range [][]string{{"--version"}, {"version"}, {"-v"}} {
		var out bytes.Buffer
		if code := run(context.Background(), args, &out, &out); code != 0 {
			t.Errorf("%q exited %d: %s", args, code, out.String())
		}
		if out.String() != "realmctl 1.2.3-test\n" {
			t.Errorf("%q printed %q", args, out.String())
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"completion", sh}, &out, &errOut); code != 0 {
			t.Errorf("completion %s exited %d: %s", sh, code, errOut.String())
		}
		if out.Len() < 200 || !strings.Contains(out.String(), "realmctl") {
			t.Errorf("completion %s printed %d bytes: %.200q", sh, out.Len(), out.String())
		}
	}
}

// TestHelpKeepsLocalAndGlobalFlagsApart: a command's help lists its own
// flags under Flags and the global ones only under Global Flags.
func TestHelpKeepsLocalAndGlobalFlagsApart(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"session", "exec", "--help"}, &out, &out); code != 0 {
		t.Fatalf("exited %d", code)
	}
	local, global, ok := strings.Cut(out.String(), "Global Flags:")
	if !ok {
		t.Fatalf("no Global Flags section:\n%s", out.String())
	}
	for _, f := range []string{"--timeout", "--tty", "--interactive", "--env", "--workdir"} {
		if !strings.Contains(local, f) || strings.Contains(global, f) {
			t.Errorf("%s is not among the local flags only", f)
		}
	}
	if strings.Contains(local, "--state-dir") || !strings.Contains(global, "--state-dir") {
		t.Errorf("--state-dir is not among the global flags only")
	}
}

func TestParseEnv(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{nil, nil, ""},
		{[]string{"A=1", "B_2=x=y", "C="}, []string{"A=1", "B_2=x=y", "C="}, ""},
		{[]string{"HOSTVAR"}, []string{"HOSTVAR=from the host"}, ""},
		{[]string{"EMPTYVAR"}, []string{"EMPTYVAR="}, ""},
		{[]string{"UNSET", "A=1"}, []string{"A=1"}, ""},
		{[]string{"HOSTVAR", "HOSTVAR=given"}, []string{"HOSTVAR=from the host", "HOSTVAR=given"}, ""},
		{[]string{"1A"}, nil, "not a variable name"},
		{[]string{sandbox.ExecTokenVar}, nil, "realm's own"},
		{[]string{"=1"}, nil, "not a variable name"},
		{[]string{"1A=1"}, nil, "not a variable name"},
		{[]string{"A-B=1"}, nil, "not a variable name"},
		{[]string{sandbox.ExecTokenVar + "=x"}, nil, "realm's own"},
	}
	host := map[string]string{"HOSTVAR": "from the host", "EMPTYVAR": "", sandbox.ExecTokenVar: "x"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	for _, tt := range tests {
		got, err := parseEnv(tt.in, lookup)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseEnv(%q) = %v, want error %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseEnv(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// saveRecord writes an active session record of runtime rt.
func saveRecord(t *testing.T, state, id, rt string) *sandbox.Record {
	t.Helper()
	cid := sandbox.ContainerName(id)
	rec := &sandbox.Record{ID: id, State: sandbox.StateActive, Runtime: rt, ContainerID: &cid,
		Mount: filepath.Join(state, "mounts", "0011223344556677"), CreatedAt: time.Now()}
	if err := sandbox.NewStore(state).Save(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestExecRefusals: what session exec refuses before it reaches a runtime:
// --env, -i and -t for OpenShell sessions (realm never passes --env to its
// CLI), -t without a terminal or with -o json.
func TestExecRefusals(t *testing.T) {
	state := t.TempDir()
	saveRecord(t, state, "0123456789ab", "openshell")
	saveRecord(t, state, "0123456789ac", "podman")
	base := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock", "-o", "json"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"session", "exec", "0123456789ab", "--env", "A=1", "--", "true"}, "takes no --env"},
		{[]string{"session", "exec", "0123456789ab", "-i", "--", "true"}, "only podman sessions take -i and -t"},
		{[]string{"session", "exec", "0123456789ac", "-e", "1BAD", "--", "true"}, "not a variable name"},
		{[]string{"session", "exec", "0123456789ac", "-t", "--", "true"}, "no JSON or YAML result"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code := run(context.Background(), append(base, tt.args...), &out, &out); code != 2 {
			t.Errorf("%q exited %d, want 2: %s", tt.args, code, out.String())
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(out.Bytes(), &e)
		if e.Error.Code != "SCHEMA_INVALID" || !strings.Contains(e.Error.Message, tt.want) {
			t.Errorf("%q printed %q, want SCHEMA_INVALID naming %q", tt.args, out.String(), tt.want)
		}
	}
	// -t in text mode, stdin no terminal (run gives none).
	var out, errOut bytes.Buffer
	args := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock", "session", "exec", "-it", "0123456789ac", "--", "/bin/sh"}
	if code := run(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "not a terminal") {
		t.Errorf("-it without a terminal: exit %d, stderr %q", code, errOut.String())
	}
}

// TestInspect: the record and the live state, with a runtime that cannot
// be reached reported as unknown and why.
func TestInspect(t *testing.T) {
	state := t.TempDir()
	rec := saveRecord(t, state, "0123456789ac", "podman")
	var out, errOut bytes.Buffer
	args := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock", "session", "inspect", rec.ID}
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got inspection
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %q", out.String())
	}
	if got.Record == nil || got.Record.ID != rec.ID || got.Live.Mount != "gone" || got.Live.Sandbox != "unknown" ||
		!strings.Contains(got.Live.SandboxError, "does not exist") {
		t.Errorf("inspect printed %s", out.String())
	}
}

// TestAudit reads a mount's audit log as realmfs writes it.
func TestAudit(t *testing.T) {
	state := t.TempDir()
	rec := saveRecord(t, state, "0123456789ac", "podman")
	os.MkdirAll(filepath.Dir(rec.Mount), 0o700)
	lines := `{"time":"2026-01-01T00:00:01Z","op":"open","path":".env","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":10,"uid":1000}
{"time":"2026-01-01T00:00:02Z","op":"rename","path":"a/../../x","code":"PATH_ESCAPE","errno":"EXDEV","pid":11,"uid":1000}
not json
{"time":"2026-01-01T00:00:03Z","op":"open","path":".ssh/id_rsa","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":12,"uid":1000,"repeat":4}
{"time":"2026-01-01T00:00:04Z","op":"open","path":"partial`
	if err := os.WriteFile(rec.Mount+".audit.log", []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--state-dir", state, "audit"}
	tests := []struct {
		args      []string
		json      bool
		wantPaths []string
	}{
		{nil, false, []string{".env", "a/../../x", ".ssh/id_rsa (x4)"}},
		{[]string{rec.ID}, true, []string{".env", "a/../../x", ".ssh/id_rsa"}},
		{[]string{"--code", "credential_path_denied"}, true, []string{".env", ".ssh/id_rsa"}},
		{[]string{"--op", "rename"}, true, []string{"a/../../x"}},
		{[]string{"-n", "1"}, true, []string{".ssh/id_rsa"}},
		{[]string{"-n", "0"}, true, nil},
		{[]string{"-n", "-1"}, true, []string{".env", "a/../../x", ".ssh/id_rsa"}},
	}
	for _, tt := range tests {
		args := append(append([]string{}, base...), tt.args...)
		if tt.json {
			args = append(args, "-o", "json")
		}
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Errorf("%q exited %d: %s", args, code, errOut.String())
			continue
		}
		var paths []string
		for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			if tt.json {
				var e struct{ Path string }
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Errorf("%q: line %q is not JSON", args, l)
				}
				paths = append(paths, e.Path)
			} else if i > 0 {
				f := strings.Fields(l)
				paths = append(paths, strings.Join(f[10:], " "))
			}
		}
		if !slices.Equal(paths, tt.wantPaths) {
			t.Errorf("%q: paths %q, want %q\n%s", args, paths, tt.wantPaths, out.String())
		}
	}
	// A code the catalogue does not have is a usage error naming the
	// known ones, not an empty table; so is a count below -1.
	for _, bad := range [][]string{{"--code", "NOPE"}, {"-n", "-2"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(append([]string{}, base...), bad...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), bad[1]) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", bad, code, errOut.String(), bad[1])
		}
	}
	var out, errOut bytes.Buffer
	run(context.Background(), append(append([]string{}, base...), "--code", "NOPE"), &out, &errOut)
	if !strings.Contains(errOut.String(), "LOCK_CONFLICT") {
		t.Errorf("--code NOPE: %q does not list the known codes", errOut.String())
	}
}

// TestPodmanURLMustBeLocal: the service binds the mount, so only a unix
// socket on this host is taken.
func TestPodmanURLMustBeLocal(t *testing.T) {
	for _, args := range [][]string{
		{"--connection", "ssh://core@host/run/podman/podman.sock", "session", "list"},
		{"--podman-socket", "tcp://127.0.0.1:8080", "session", "list"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), append([]string{"-o", "json"}, args...), &out, &out); code != 2 || !strings.Contains(out.String(), "SCHEMA_INVALID") {
			t.Errorf("%q: exit %d, %s", args, code, out.String())
		}
	}
}
