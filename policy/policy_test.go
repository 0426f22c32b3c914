package policy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/realm-dev/realm/errcode"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *Policy
	}{
		{"minimal", "version: 1\n", Default()},
		{"full", `version: 1
credentials:
  defaults: true
  deny: ["secrets/**"]
  allow: ["**/.env.example", "config/test.pem"]
  hide: false
symlinks: inside-only
audit: {path: /var/log/realm/audit.jsonl}
`, &Policy{
			Version: 1,
			Credentials: Credentials{Defaults: true, Deny: []string{"secrets/**"}, DenySources: []string{"policy:policy.yaml:4"},
				Allow: []string{"**/.env.example", "config/test.pem"}, AllowSources: []string{"policy:policy.yaml:5", "policy:policy.yaml:5"}},
			Protect:     Protect{Defaults: true},
			Coordinated: Coordinated{Defaults: true},
			Symlinks:    SymlinksInsideOnly,
			Audit:       Audit{Path: "/var/log/realm/audit.jsonl"},
		}},
		{"defaults off and hide", "version: 1\ncredentials:\n  defaults: false\n  hide: true\n",
			&Policy{Version: 1, Credentials: Credentials{Hide: true}, Protect: Protect{Defaults: true}, Coordinated: Coordinated{Defaults: true}, Symlinks: SymlinksInsideOnly}},
		{"empty sections take defaults", "version: 1\ncredentials:\naudit:\n", Default()},
		{"empty lists", "version: 1\ncredentials: {deny: [], allow: }\n",
			&Policy{Version: 1, Credentials: Credentials{Defaults: true, Deny: []string{}}, Protect: Protect{Defaults: true}, Coordinated: Coordinated{Defaults: true}, Symlinks: SymlinksInsideOnly}},
		{"block lists and comments", "# realm\nversion: 1 # one\ncredentials:\n  deny:\n    - 'a/**'\n    - \"**/*.secret\"\n",
			&Policy{Version: 1, Credentials: Credentials{Defaults: true, Deny: []string{"a/**", "**/*.secret"}, DenySources: []string{"policy:policy.yaml:5", "policy:policy.yaml:6"}}, Protect: Protect{Defaults: true}, Coordinated: Coordinated{Defaults: true}, Symlinks: SymlinksInsideOnly}},
		{"protect section", "version: 1\nprotect:\n  defaults: false\n  paths: ['tools/*.sh', '**/.yarnrc.yml']\n  allow: ['tools/ok.sh']\n",
			&Policy{Version: 1, Credentials: Credentials{Defaults: true}, Protect: Protect{Paths: []string{"tools/*.sh", "**/.yarnrc.yml"}, Allow: []string{"tools/ok.sh"},
				PathSources: []string{"policy:policy.yaml:4", "policy:policy.yaml:4"}, AllowSources: []string{"policy:policy.yaml:5"}}, Coordinated: Coordinated{Defaults: true}, Symlinks: SymlinksInsideOnly}},
		{"coordinated section", "version: 1\ncoordinated:\n  defaults: false\n  paths: ['data/*.lmdb']\n",
			&Policy{Version: 1, Credentials: Credentials{Defaults: true}, Protect: Protect{Defaults: true}, Coordinated: Coordinated{Paths: []string{"data/*.lmdb"}, PathSources: []string{"policy:policy.yaml:4"}}, Symlinks: SymlinksInsideOnly}},
		{"document marker", "---\nversion: 1\n", Default()},
		{"hex version", "version: 0x1\n", Default()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("policy.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate of a parsed policy: %v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the message after "SCHEMA_INVALID: "
	}{
		{"empty file", "", "policy.yaml:1: empty policy"},
		{"only comments", "# nothing\n", "policy.yaml:1: empty policy"},
		{"null document", "---\n~\n", "policy.yaml:2: empty policy"},
		{"not a mapping", "- version: 1\n", "policy.yaml:1: expected a mapping, got a list"},
		{"missing version", "credentials: {}\n", "policy.yaml:1: version: required"},
		{"bad version", "version: 2\n", "policy.yaml:1: version: unsupported version 2 (want 1)"},
		{"version string", "version: \"1\"\n", `policy.yaml:1: version: expected an integer, got string "1"`},
		{"version float", "symlinks: inside-only\nversion: 1.0\n", "policy.yaml:2: version: expected an integer, got number 1.0"},
		{"unknown top-level key", "version: 1\nsymlink: inside-only\n",
			"policy.yaml:2: symlink: unknown field (want one of version, credentials, protect, coordinated, symlinks, audit)"},
		{"unknown key on line 5", "version: 1\ncredentials:\n  defaults: true\n  deny: []\n  denny: [x]\n",
			"policy.yaml:5: credentials.denny: unknown field (want one of defaults, deny, allow, hide)"},
		{"duplicate key", "version: 1\nversion: 1\n", "policy.yaml:2: version: duplicate field"},
		{"wrong type bool", "version: 1\ncredentials:\n  hide: yes\n",
			`policy.yaml:3: credentials.hide: expected true or false, got string "yes"`},
		{"wrong type defaults", "version: 1\ncredentials:\n  defaults: 1\n",
			"policy.yaml:3: credentials.defaults: expected true or false, got integer 1"},
		{"wrong type list", "version: 1\ncredentials:\n  deny: secrets/**\n",
			`policy.yaml:3: credentials.deny: expected a list of globs, got string "secrets/**"`},
		{"wrong type element", "version: 1\ncredentials:\n  allow:\n    - ok/**\n    - 42\n",
			"policy.yaml:5: credentials.allow[1]: expected a string, got integer 42"},
		{"wrong type section", "version: 1\ncredentials: [a]\n",
			"policy.yaml:2: credentials: expected a mapping, got a list"},
		{"bad glob", "version: 1\ncredentials:\n  deny:\n    - 'ok/**'\n    - 'a/['\n",
			`policy.yaml:5: credentials.deny[1]: bad glob "a/[": syntax error in pattern`},
		{"bad glob inline", "version: 1\ncredentials: {deny: [\"x\", \"{a\"]}\n",
			`policy.yaml:2: credentials.deny[1]: bad glob "{a": syntax error in pattern`},
		{"absolute glob", "version: 1\ncredentials:\n  allow: ['/etc/x']\n",
			`policy.yaml:3: credentials.allow[0]: glob "/etc/x" must be relative to the workspace (no leading /)`},
		{"dotdot glob", "version: 1\ncredentials:\n  deny: ['a/../b']\n",
			`policy.yaml:3: credentials.deny[0]: glob "a/../b" has a ".." segment; paths are canonical`},
		{"empty glob", "version: 1\ncredentials:\n  deny: ['']\n", "policy.yaml:3: credentials.deny[0]: empty glob"},
		{"bad coordinated glob", "version: 1\ncoordinated:\n  defaults: true\n  paths: ['ok.db', 'a/[']\n", `policy.yaml:4: coordinated.paths[1]: bad glob "a/[": syntax error in pattern`},
		{"unknown coordinated key", "version: 1\ncoordinated:\n  allow: []\n", "policy.yaml:3: coordinated.allow: unknown field (want one of defaults, paths)"},
		{"trailing slash glob", "version: 1\ncredentials:\n  deny: ['secrets/']\n",
			`policy.yaml:3: credentials.deny[0]: glob "secrets/" has an empty path segment`},
		{"unquoted star", "version: 1\ncredentials:\n  deny:\n    - **/.env\n",
			"policy.yaml:4: invalid YAML: did not find expected alphabetic or numeric character (quote globs that start with *)"},
		{"bad symlinks", "version: 1\nsymlinks: follow\n",
			`policy.yaml:2: symlinks: unknown mode "follow" (want "inside-only")`},
		{"symlinks type", "version: 1\nsymlinks: [a]\n", "policy.yaml:2: symlinks: expected a string, got a list"},
		{"audit relative", "version: 1\naudit: {path: audit.jsonl}\n",
			`policy.yaml:2: audit.path: "audit.jsonl" is not an absolute path`},
		{"audit unclean", "version: 1\naudit:\n  path: /var/log/../x\n",
			`policy.yaml:3: audit.path: "/var/log/../x" is not a clean path (want "/var/x")`},
		{"audit in /proc", "version: 1\naudit:\n  path: /proc/self/mem\n",
			`policy.yaml:3: audit.path: "/proc/self/mem" is under /proc, whose files are the kernel's, not a log`},
		{"audit in /sys", "version: 1\naudit: {path: /sys/kernel/x}\n", `policy.yaml:2: audit.path: "/sys/kernel/x" is under /sys`},
		{"audit in /dev", "version: 1\naudit: {path: /dev/sda}\n", `policy.yaml:2: audit.path: "/dev/sda" is under /dev`},
		{"audit is /dev", "version: 1\naudit: {path: /dev}\n", `policy.yaml:2: audit.path: "/dev" is under /dev`},
		{"reversed range", "version: 1\ncredentials:\n  deny: ['[z-a]']\n",
			`policy.yaml:3: credentials.deny[0]: glob "[z-a]" has the range z-a, which is empty`},
		{"reversed range in allow", "version: 1\ncredentials:\n  allow: ['x', '**/k[!9-0]']\n",
			`policy.yaml:3: credentials.allow[1]: glob "**/k[!9-0]" has the range 9-0`},
		{"reversed escaped range", "version: 1\ncredentials:\n  deny: ['[\\z-a]']\n",
			`policy.yaml:3: credentials.deny[0]: glob "[\\z-a]" has the range z-a`},
		{"audit without path", "version: 1\naudit: {}\n", "policy.yaml:2: audit.path: required when audit is given"},
		{"audit unknown", "version: 1\naudit:\n  file: /x\n", "policy.yaml:3: audit.file: unknown field (want one of path)"},
		{"alias", "version: 1\ncredentials:\n  deny: &d ['a']\n  allow: *d\n", "policy.yaml:4: credentials.allow: YAML aliases are not supported"},
		{"alias element", "version: 1\ncredentials:\n  deny: [&d 'a', *d]\n", "policy.yaml:3: credentials.deny[1]: YAML aliases are not supported"},
		{"non-string key", "version: 1\n1: x\n", "policy.yaml:2: expected a field name, got integer 1"},
		{"two documents", "version: 1\n---\nversion: 1\n", "policy.yaml:2: more than one YAML document"},
		{"syntax error", "version: 1\ncredentials: {deny: [\n", "policy.yaml:2: invalid YAML: did not find expected node content"},
		{"tab indent", "version: 1\ncredentials:\n\tdeny: []\n", "policy.yaml:3: invalid YAML: found character that cannot start any token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("policy.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse = %+v, want error %q", p, tt.want)
			}
			if c, _ := errcode.Of(err); c != errcode.SchemaInvalid {
				t.Errorf("code = %q, want SCHEMA_INVALID (err %v)", c, err)
			}
			got := strings.TrimPrefix(err.Error(), "SCHEMA_INVALID: ")
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("error\n got  %q\n want %q...", got, tt.want)
			}
		})
	}
}

func TestParseBadGlobWrapsCause(t *testing.T) {
	_, err := Parse("p.yaml", []byte("version: 1\ncredentials: {deny: ['a/[']}\n"))
	if !errors.Is(err, doublestar.ErrBadPattern) {
		t.Errorf("error %v does not wrap doublestar.ErrBadPattern", err)
	}
	if !errors.Is(err, &errcode.Error{Code: errcode.SchemaInvalid}) {
		t.Errorf("error %v is not SCHEMA_INVALID", err)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := []byte("version: 1\n" + strings.Repeat("# pad\n", maxPolicySize/6+1))
	if _, err := Parse("big.yaml", data); err == nil || !strings.Contains(err.Error(), "big.yaml: file larger") {
		t.Errorf("Parse of a %d-byte file: %v", len(data), err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(good, []byte("version: 1\ncredentials: {hide: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(good)
	if err != nil || !p.Credentials.Hide {
		t.Fatalf("Load = %+v, %v", p, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\n\n\nsymlinks: no\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad+":4: symlinks:") {
		t.Errorf("Load(bad) = %v, want the path and line 4", err)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if c, _ := errcode.Of(err); c != errcode.SchemaInvalid || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want SCHEMA_INVALID wrapping ErrNotExist", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"default", func(*Policy) {}, ""},
		{"version", func(p *Policy) { p.Version = 0 }, "policy: version: unsupported version 0"},
		{"glob", func(p *Policy) { p.Credentials.Allow = []string{"ok", "[x"} }, `policy: credentials.allow[1]: bad glob "[x"`},
		{"symlinks", func(p *Policy) { p.Symlinks = "" }, `policy: symlinks: unknown mode ""`},
		{"audit", func(p *Policy) { p.Audit.Path = "rel" }, `policy: audit.path: "rel" is not an absolute path`},
		{"audit /proc", func(p *Policy) { p.Audit.Path = "/proc/self/mem" }, `policy: audit.path: "/proc/self/mem" is under /proc`},
		{"reversed range", func(p *Policy) { p.Credentials.Deny = []string{"[z-a]"} }, `policy: credentials.deny[0]: glob "[z-a]" has the range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Default()
			tt.edit(p)
			err := p.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate = %v", err)
				}
				return
			}
			if c, _ := errcode.Of(err); c != errcode.SchemaInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want SCHEMA_INVALID containing %q", err, tt.want)
			}
		})
	}
}

// ownAllow is p's allow list without the built-in public globs, which a
// rendered policy with defaults lists first.
func ownAllow(p *Policy) []string {
	var own []string
	for _, g := range p.Credentials.Allow {
		if !p.Credentials.Defaults || !slices.ContainsFunc(DefaultPublicGlobs, func(b Glob) bool { return b.Pattern == g }) {
			own = append(own, g)
		}
	}
	return own
}

func TestRender(t *testing.T) {
	policies := map[string]*Policy{
		"default": Default(),
		"full": {Version: 1, Symlinks: SymlinksInsideOnly, Audit: Audit{Path: "/var/log/realm/audit.jsonl"},
			Credentials: Credentials{Defaults: true, Hide: true,
				Deny:  []string{"secrets/**", "**/.env", "it's/*"},
				Allow: []string{"docs/*.pem", "true", "123"}}},
		"no defaults": {Version: 1, Symlinks: SymlinksInsideOnly, Credentials: Credentials{Deny: []string{"a"}}},
		"empty":       {Version: 1, Symlinks: SymlinksInsideOnly},
		"protect":     {Version: 1, Symlinks: SymlinksInsideOnly, Protect: Protect{Defaults: true, Paths: []string{"tools/*.sh"}, Allow: []string{"**/.npmrc"}}},
		"coordinated": {Version: 1, Symlinks: SymlinksInsideOnly, Coordinated: Coordinated{Defaults: true, Paths: []string{"data/*.lmdb"}}},
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			out := p.Render()
			back, err := Parse("rendered.yaml", out)
			if err != nil {
				t.Fatalf("rendered policy does not parse: %v\n%s", err, out)
			}
			if back.Credentials.Defaults != p.Credentials.Defaults || back.Credentials.Hide != p.Credentials.Hide ||
				back.Audit != p.Audit || !reflect.DeepEqual(ownAllow(back), p.Credentials.Allow) && len(p.Credentials.Allow) > 0 {
				t.Errorf("round trip changed the policy:\n%+v\n%+v", p, back)
			}
			if again := back.Render(); string(again) != string(out) {
				t.Errorf("Render is not stable:\n%s\n---\n%s", out, again)
			}
			m1, m2 := p.Matcher(), back.Matcher()
			for _, rel := range equivalencePaths() {
				if m1.Denied(rel) != m2.Denied(rel) {
					t.Errorf("Denied(%q) differs after round trip", rel)
				}
				if m1.Protected(rel) != m2.Protected(rel) {
					t.Errorf("Protected(%q) differs after round trip", rel)
				}
				if m1.Coordinated(rel) != m2.Coordinated(rel) {
					t.Errorf("Coordinated(%q) differs after round trip", rel)
				}
			}
		})
	}
	out := string(Default().Render())
	for _, want := range []string{"version: 1", "defaults: true", "- '**/.env' # built-in: realm", "symlinks: inside-only", "hide: false",
		"- '**/.git/hooks/**' # built-in: githooks(5)", "- '**/.git/**/hooks/*.sample' # built-in: git's template hooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("default rendering lacks %q:\n%s", want, out)
		}
	}
}
