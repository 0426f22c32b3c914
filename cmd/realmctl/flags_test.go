package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// globalFlagCases are every global flag with a value that is not its
// default and the field it must set. TestGlobalFlagCasesCoverEveryFlag
// keeps the list complete.
var globalFlagCases = []struct {
	flag []string
	get  func(*globals) any
	want any
}{
	{[]string{"--state-dir", "/tmp/realm-flag-test"}, func(g *globals) any { return g.stateDir }, "/tmp/realm-flag-test"},
	{[]string{"--podman-socket", "unix:///tmp/flag.sock"}, func(g *globals) any { return g.podmanSocket }, "unix:///tmp/flag.sock"},
	{[]string{"--connection", "unix:///tmp/conn.sock"}, func(g *globals) any { return g.connection }, "unix:///tmp/conn.sock"},
	{[]string{"-o", "json"}, func(g *globals) any { return g.format }, "json"},
	{[]string{"--output=json"}, func(g *globals) any { return g.format }, "json"},
	{[]string{"--no-reap"}, func(g *globals) any { return g.noReap }, true},
	{[]string{"--realmfs", "/opt/realmfs"}, func(g *globals) any { return g.realmfs }, "/opt/realmfs"},
	{[]string{"--openshell", "/opt/openshell"}, func(g *globals) any { return g.openshell }, "/opt/openshell"},
	{[]string{"--lock-wait", "3s"}, func(g *globals) any { return g.lockWait }, 3 * time.Second},
}

func TestGlobalFlagCasesCoverEveryFlag(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	newGlobals().register(fs)
	covered := map[string]bool{}
	for _, c := range globalFlagCases {
		name, _, _ := strings.Cut(strings.TrimLeft(c.flag[0], "-"), "=")
		if len(name) == 1 {
			if f := fs.ShorthandLookup(name); f != nil {
				name = f.Name
			}
		}
		covered[name] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !covered[f.Name] {
			t.Errorf("global flag --%s has no row in globalFlagCases", f.Name)
		}
	})
}

// commandLines are every command with arguments that parse: the command's
// words, its own flags and arguments before "--", and its argv after "--"
// (nil: no "--").
var commandLines = []struct {
	words   []string
	args    []string
	dashArg []string
}{
	{[]string{"session", "create"}, []string{"--workspace", "/ws"}, []string{"/bin/sleep", "9"}},
	{[]string{"session", "exec"}, []string{"abc", "--timeout", "5s"}, []string{"true"}},
	{[]string{"session", "destroy"}, []string{"abc"}, nil},
	{[]string{"session", "list"}, nil, nil},
	{[]string{"session", "logs"}, []string{"abc", "--follow"}, nil},
	{[]string{"session", "inspect"}, []string{"abc"}, nil},
	{[]string{"session", "diff"}, []string{"abc", "--since", "10m"}, nil},
	{[]string{"session", "undo"}, []string{"abc", "--dry-run"}, nil},
	{[]string{"audit"}, []string{"abc", "--code", "CREDENTIAL_PATH_DENIED"}, nil},
	{[]string{"version"}, nil, nil},
	{[]string{"image", "init"}, []string{"--busybox", "/bin/busybox"}, nil},
	{[]string{"reap"}, []string{"--all"}, nil},
	{[]string{"openshell-interceptor"}, []string{"--listen", "unix:///tmp/i.sock"}, nil},
}

// parsed is a command line as the command tree took it: the command it
// reached, its arguments (without "--") and where "--" stood among them.
type parsed struct {
	c    *cli
	cmd  *cobra.Command
	args []string
	dash int
}

// parseCommandLine runs args through realmctl's command tree with every
// command's action replaced by one that records what it was given.
func parseCommandLine(args []string) (*parsed, error) {
	p := &parsed{c: &cli{g: newGlobals(), out: &output{format: "text", w: io.Discard, ew: io.Discard}}}
	root := newRoot(p.c)
	var stub func(*cobra.Command)
	stub = func(cmd *cobra.Command) {
		if cmd.HasParent() && !cmd.HasSubCommands() {
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				p.cmd, p.args, p.dash = cmd, args, cmd.ArgsLenAtDash()
				return nil
			}
		}
		for _, s := range cmd.Commands() {
			stub(s)
		}
	}
	stub(root)
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	_, err := root.ExecuteC()
	return p, err
}

// words is a command's words after "realmctl".
func words(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), "realmctl ")
}

func TestCommandLinesCoverEveryCommand(t *testing.T) {
	var visit func(*cobra.Command)
	visit = func(cmd *cobra.Command) {
		for _, s := range cmd.Commands() {
			if s.HasSubCommands() {
				visit(s)
				continue
			}
			w := words(s)
			if !slices.ContainsFunc(commandLines, func(l struct {
				words   []string
				args    []string
				dashArg []string
			}) bool {
				return strings.Join(l.words, " ") == w
			}) {
				t.Errorf("command %q has no row in commandLines", w)
			}
		}
	}
	visit(newRoot(&cli{g: newGlobals(), out: &output{}}))
}

// TestGlobalFlagsAnywhere puts every global flag at every place of every
// command line before "--" and checks that it takes effect there and that
// the command's own arguments are untouched.
func TestGlobalFlagsAnywhere(t *testing.T) {
	positions := []string{"before the command", "between its words", "after the command", "after its arguments"}
	for _, cl := range commandLines {
		for _, fc := range globalFlagCases {
			for _, pos := range positions {
				if pos == "between its words" && len(cl.words) < 2 {
					continue
				}
				name := strings.Join(cl.words, "_") + "/" + strings.Join(fc.flag, "=") + "/" + pos
				t.Run(name, func(t *testing.T) {
					var args []string
					switch pos {
					case "before the command":
						args = concat(fc.flag, cl.words, cl.args)
					case "between its words":
						args = concat(cl.words[:1], fc.flag, cl.words[1:], cl.args)
					case "after the command":
						args = concat(cl.words, fc.flag, cl.args)
					case "after its arguments":
						args = concat(cl.words, cl.args, fc.flag)
					}
					if cl.dashArg != nil {
						args = concat(args, []string{"--"}, cl.dashArg)
					}
					p, err := parseCommandLine(args)
					if err != nil {
						t.Fatalf("parse %q: %v", args, err)
					}
					if p.cmd == nil || words(p.cmd) != strings.Join(cl.words, " ") {
						t.Fatalf("parse %q: command %v", args, p.cmd)
					}
					if got := fc.get(p.c.g); !reflect.DeepEqual(got, fc.want) {
						t.Errorf("parse %q: %s = %v, want %v", args, fc.flag[0], got, fc.want)
					}
					wantArgs := concat(positional(p.cmd, cl.args), cl.dashArg)
					if got := p.args; !slices.Equal(got, wantArgs) {
						t.Errorf("parse %q: arguments %q, want %q", args, got, wantArgs)
					}
					if cl.dashArg != nil && p.dash != len(wantArgs)-len(cl.dashArg) {
						t.Errorf("parse %q: -- at %d", args, p.dash)
					}
				})
			}
		}
	}
}

// positional is what of args is not a flag of the command.
func positional(cmd *cobra.Command, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		if f := cmd.Flags().Lookup(strings.TrimLeft(a, "-")); f != nil && f.Value.Type() != "bool" {
			i++
		}
	}
	return out
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestAfterDashIsNeverAFlag: words after "--" that look like global flags
// are the command's argv and change nothing.
func TestAfterDashIsNeverAFlag(t *testing.T) {
	tests := []struct {
		args     []string
		wantArgs []string
	}{
		{[]string{"session", "exec", "abc", "--", "sh", "-o", "json", "--state-dir", "/x", "--no-reap"},
			[]string{"abc", "sh", "-o", "json", "--state-dir", "/x", "--no-reap"}},
		{[]string{"session", "create", "--workspace", "/ws", "--", "/bin/agent", "--output=json", "--lock-wait", "1s", "-h"},
			[]string{"/bin/agent", "--output=json", "--lock-wait", "1s", "-h"}},
	}
	for _, tt := range tests {
		p, err := parseCommandLine(tt.args)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.args, err)
		}
		if !reflect.DeepEqual(p.c.g, newGlobals()) {
			t.Errorf("parse %q: globals changed to %+v", tt.args, *p.c.g)
		}
		if got := p.args; !slices.Equal(got, tt.wantArgs) {
			t.Errorf("parse %q: arguments %q, want %q", tt.args, got, tt.wantArgs)
		}
	}
}

// TestHelpListsGlobalFlags: every command's --help lists the global flags
// (and TestGlobalFlagsAnywhere proves each one listed takes effect).
func TestHelpListsGlobalFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	newGlobals().register(fs)
	for _, cl := range commandLines {
		var out bytes.Buffer
		args := concat(cl.words, []string{"--help"})
		if code := run(context.Background(), args, &out, io.Discard); code != 0 {
			t.Errorf("%q exited %d", args, code)
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(out.String(), "--"+f.Name) {
				t.Errorf("%q does not list --%s:\n%s", args, f.Name, out.String())
			}
		})
	}
}

// TestOutputFlagAfterCommand is the report: -o json after the
// command must print JSON.
func TestOutputFlagAfterCommand(t *testing.T) {
	state := t.TempDir()
	tests := []struct {
		args     []string
		wantCode string // JSON error code; "" for a JSON result
	}{
		{[]string{"session", "exec", "-o", "json", "0123456789ab", "--", "true"}, "REALM_NOT_ACTIVE"},
		{[]string{"session", "exec", "0123456789ab", "-o", "json", "--", "true"}, "REALM_NOT_ACTIVE"},
		{[]string{"session", "-o", "json", "destroy", "nope"}, "REALM_NOT_ACTIVE"},
		{[]string{"session", "list", "-o", "json"}, ""},
		{[]string{"session", "create", "-o", "json", "--workspace", "/nonexistent/ws"}, "SCHEMA_INVALID"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		args := concat(tt.args, nil)
		args = append([]string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock"}, args...)
		run(context.Background(), args, &out, io.Discard)
		var v any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Errorf("%q printed no JSON: %q", tt.args, out.String())
			continue
		}
		var e struct{ Error struct{ Code string } }
		json.Unmarshal(out.Bytes(), &e)
		if e.Error.Code != tt.wantCode {
			t.Errorf("%q: error code %q, want %q (%s)", tt.args, e.Error.Code, tt.wantCode, out.String())
		}
	}
}

func TestDefaultStateDir(t *testing.T) {
	tests := []struct {
		name string
		euid int
		env  map[string]string
		want string
	}{
		{"root", 0, map[string]string{"HOME": "/root", "XDG_STATE_HOME": "/root/.st"}, "/var/lib/realm"},
		{"root with REALM_STATE_DIR", 0, map[string]string{"REALM_STATE_DIR": "/srv/realm"}, "/srv/realm"},
		{"user with REALM_STATE_DIR", 1000, map[string]string{"REALM_STATE_DIR": "/tmp/r", "XDG_STATE_HOME": "/x"}, "/tmp/r"},
		{"user with XDG_STATE_HOME", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/home/u/.st"}, "/home/u/.st/realm"},
		{"user with a relative XDG_STATE_HOME (ignored, as the spec says)", 1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "st"}, "/home/u/.local/state/realm"},
		{"user with HOME only", 1000, map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/realm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultStateDir(tt.euid, func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("defaultStateDir = %q, want %q", got, tt.want)
			}
		})
	}
}
