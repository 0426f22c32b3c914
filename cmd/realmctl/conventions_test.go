package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/sandbox"
)

// TestEveryCommandHasExamples: every command's --help, realmctl's own and
// cobra's help and completion, has an Examples: section.
func TestEveryCommandHasExamples(t *testing.T) {
	var paths [][]string
	var walk func(cmd *cobra.Command, path []string)
	walk = func(cmd *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range cmd.Commands() {
			if !sub.Hidden {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
	}
	root := newRoot(&cli{g: newGlobals(), out: &output{format: "text"}})
	exampleCobrasCommands(root)
	walk(root, nil)
	if len(paths) < 15 {
		t.Fatalf("walked only %d commands: %q", len(paths), paths)
	}
	for _, p := range paths {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(slices.Clone(p), "--help"), &out, &errOut); code != 0 {
			t.Errorf("%q --help exited %d: %s", p, code, errOut.String())
		}
		if !strings.Contains(out.String(), "\nExamples:\n  ") {
			t.Errorf("realmctl %s --help has no Examples: section:\n%s", strings.Join(p, " "), out.String())
		}
	}
}

// saveNamed writes an active openshell record with a name and a mount
// that is not there.
func saveNamed(t *testing.T, state, id, name string) {
	t.Helper()
	rec := saveRecord(t, state, id, "openshell")
	rec.Name = name
	rec.Workspace = "/ws/" + name
	if err := sandbox.NewStore(state).Save(rec); err != nil {
		t.Fatal(err)
	}
}

// TestSessionCompletion: the commands that take sessions complete their
// ids and names from the state dir of the line being completed.
func TestSessionCompletion(t *testing.T) {
	state := t.TempDir()
	saveNamed(t, state, "0123456789ab", "alpha")
	saveNamed(t, state, "fedcba987654", "beta")
	tests := []struct {
		line []string // after __complete --state-dir STATE
		want []string // completions, in order
	}{
		{[]string{"session", "exec", ""}, []string{"0123456789ab", "alpha", "fedcba987654", "beta"}},
		{[]string{"session", "exec", "b"}, []string{"beta"}},
		{[]string{"session", "exec", "01"}, []string{"0123456789ab"}},
		{[]string{"session", "exec", "alpha", ""}, nil},
		{[]string{"session", "exec", "alpha", "--", ""}, nil},
		{[]string{"session", "rm", "alpha", ""}, []string{"0123456789ab", "alpha", "fedcba987654", "beta"}},
		{[]string{"session", "inspect", "a"}, []string{"alpha"}},
		{[]string{"session", "logs", "f"}, []string{"fedcba987654"}},
		{[]string{"audit", "be"}, []string{"beta"}},
		{[]string{"session", "exec", "zzz"}, nil},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		args := append([]string{"__complete", "--state-dir", state}, tt.line...)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%q exited %d: %s", tt.line, code, errOut.String())
		}
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("complete %q = %q, want %q\n%s", tt.line, got, tt.want, out.String())
		}
	}
}

// TestListFormats: session list's -q, -o wide, -o json and -o yaml, with
// the live state (no runtime answers: the sandbox is unknown, the mount
// gone, so the session is dead for its mount) beside the record's.
func TestListFormats(t *testing.T) {
	state := t.TempDir()
	saveNamed(t, state, "0123456789ab", "alpha")
	saveNamed(t, state, "fedcba987654", "beta")
	t.Setenv("PATH", t.TempDir()) // no openshell CLI: its sandboxes are unknown
	base := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock"}
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"quiet", []string{"session", "ls", "-q"}, func(t *testing.T, out string) {
			if out != "0123456789ab\nfedcba987654\n" {
				t.Errorf("ls -q = %q", out)
			}
		}},
		{"text", []string{"session", "ls"}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || strings.Contains(lines[0], "SANDBOX") ||
				!strings.Contains(lines[1], "dead (mount gone)") {
				t.Errorf("ls =\n%s", out)
			}
		}},
		{"wide", []string{"session", "ls", "-o", "wide"}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasSuffix(lines[0], "SANDBOX  MOUNT  MOUNTPOINT") ||
				!strings.Contains(lines[1], "unknown  gone   "+filepath.Join(state, "mounts")) {
				t.Errorf("ls -o wide =\n%s", out)
			}
		}},
		{"json", []string{"session", "ls", "-o", "json"}, func(t *testing.T, out string) {
			var rows []struct {
				ID, Name, State string
				Live            sandbox.Health
			}
			if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0].Name != "alpha" ||
				rows[0].State != "active" || rows[0].Live.Status != "dead" || rows[0].Live.Mount != "gone" {
				t.Errorf("ls -o json = %s (%v)", out, err)
			}
		}},
		{"yaml", []string{"-o", "yaml", "session", "ls"}, func(t *testing.T, out string) {
			var rows []map[string]any
			if err := yaml.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[1]["id"] != "fedcba987654" ||
				rows[1]["live"].(map[string]any)["status"] != "dead" || strings.Contains(out, "{") {
				t.Errorf("ls -o yaml = %s (%v)", out, err)
			}
		}},
		{"inspect yaml", []string{"session", "inspect", "beta", "-o", "yaml"}, func(t *testing.T, out string) {
			var in struct {
				Record map[string]any
				Live   map[string]any
			}
			if err := yaml.Unmarshal([]byte(out), &in); err != nil || in.Record["name"] != "beta" || in.Live["mount"] != "gone" {
				t.Errorf("inspect -o yaml = %s (%v)", out, err)
			}
		}},
		{"inspect json", []string{"session", "inspect", "beta"}, func(t *testing.T, out string) {
			var in inspection
			if err := json.Unmarshal([]byte(out), &in); err != nil || in.Record.Name != "beta" || in.Live.Status != "dead" {
				t.Errorf("inspect = %s (%v)", out, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), append(slices.Clone(base), tt.args...), &out, &errOut); code != 0 {
				t.Fatalf("%q exited %d: %s", tt.args, code, errOut.String())
			}
			tt.check(t, out.String())
		})
	}
}

// TestDestroyMany: session rm takes several sessions, or --all; it goes on
// past one it cannot find and fails at the end. The sessions are the fake
// OpenShell CLI's, whose sandboxes are gone already.
func TestDestroyMany(t *testing.T) {
	fake := buildFakeOpenShell(t, t.TempDir())
	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantOut  string
		wantLeft []string // records left
	}{
		{"several", []string{"session", "rm", "alpha", "fedcba987654"}, 0, "destroyed 0123456789ab\ndestroyed fedcba987654\n", []string{"abcdefabcdef"}},
		{"one", []string{"session", "destroy", "beta"}, 0, "destroyed fedcba987654\n", []string{"0123456789ab", "abcdefabcdef"}},
		{"all", []string{"session", "rm", "--all"}, 0, "destroyed 0123456789ab\ndestroyed abcdefabcdef\ndestroyed fedcba987654\n", nil},
		{"one unknown among them", []string{"session", "rm", "alpha", "nope", "beta"}, 69, "destroyed 0123456789ab\ndestroyed fedcba987654\n", []string{"abcdefabcdef"}},
		{"all and names", []string{"session", "rm", "--all", "alpha"}, 2, "", []string{"0123456789ab", "abcdefabcdef", "fedcba987654"}},
		{"none", []string{"session", "rm"}, 2, "", []string{"0123456789ab", "abcdefabcdef", "fedcba987654"}},
		{"json several", []string{"-o", "json", "session", "rm", "alpha", "beta"}, 0,
			`[{"id":"0123456789ab","destroyed":true},{"id":"fedcba987654","destroyed":true}]` + "\n", []string{"abcdefabcdef"}},
		{"json one unknown among them", []string{"-o", "json", "session", "rm", "alpha", "nope"}, 69,
			`{"error":{"code":"REALM_NOT_ACTIVE","message":"no session \"nope\""}}` + "\n", []string{"abcdefabcdef", "fedcba987654"}},
		{"json one", []string{"-o", "json", "session", "rm", "alpha"}, 0,
			`{"id":"0123456789ab","destroyed":true}` + "\n", []string{"abcdefabcdef", "fedcba987654"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			t.Setenv("FAKE_OPENSHELL_STATE", filepath.Join(t.TempDir(), "fake"))
			t.Setenv("FAKE_OPENSHELL_LOG", "")
			saveNamed(t, state, "0123456789ab", "alpha")
			saveNamed(t, state, "fedcba987654", "beta")
			saveNamed(t, state, "abcdefabcdef", "gamma")
			var out, errOut bytes.Buffer
			args := append([]string{"--state-dir", state, "--openshell", fake, "--podman-socket", "unix:///nonexistent.sock"}, tt.args...)
			if code := run(context.Background(), args, &out, &errOut); code != tt.wantExit {
				t.Errorf("exit %d, want %d: %s %s", code, tt.wantExit, out.String(), errOut.String())
			}
			if out.String() != tt.wantOut {
				t.Errorf("stdout %q, want %q", out.String(), tt.wantOut)
			}
			left, _ := sandbox.NewStore(state).List()
			if !slices.Equal(left, tt.wantLeft) {
				t.Errorf("records left %q, want %q", left, tt.wantLeft)
			}
		})
	}
}

// TestToYAML: -o yaml keeps the JSON's keys and their order, in block
// style, quoting only what would read back as another type.
func TestToYAML(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{map[string]any{"b": 1, "a": "x"}, "a: x\nb: 1\n"},
		{struct {
			Z string   `json:"z"`
			A []string `json:"a"`
		}{"true", []string{"1", "y"}}, "z: \"true\"\na:\n    - \"1\"\n    - y\n"},
		{[]int{}, "[]\n"},
		{struct {
			T time.Time `json:"t"`
		}{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, "t: \"2026-01-02T03:04:05Z\"\n"},
	}
	for _, tt := range tests {
		got, err := toYAML(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("toYAML(%v) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
