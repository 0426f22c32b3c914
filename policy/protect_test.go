package policy

import "testing"

func TestProtected(t *testing.T) {
	m := Default().Matcher()
	for _, tt := range []struct {
		rel  string
		want bool
	}{
		{".git/hooks/pre-commit", true},
		{"sub/repo/.git/hooks/post-checkout", true},
		{".git/hooks/pre-commit.sample", false},
		{".git/modules/lib/hooks/pre-push", true},
		{".git/modules/lib/hooks/pre-push.sample", false},
		{".git/HOOKS/pre-commit", true}, // folded: a case-insensitive BACKING
		{".git/config", false},
		{".git/index", false},
		{".envrc", true},
		{"a/b/.ENVRC", true},
		{".envrc.", true}, // vfat drops the trailing dot
		{".bashrc", true},
		{"sub/.bashrc", false}, // only a home-directory workspace's root
		{".docker/config.json", true},
		{"m/.docker/config.json", true},
		{"m/docker/config.json", false},
		{".npmrc", true},
		{".config/gh/config.yml", true},
		{".terraform.d/credentials.tfrc.json", true},
		{"src/main.go", false},
		{"", false},
	} {
		if got := m.Protected(tt.rel); got != tt.want {
			t.Errorf("Protected(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestProtectedPrefix(t *testing.T) {
	m := Default().Matcher()
	for _, tt := range []struct {
		rel  string
		want bool
	}{
		{".terraform.d", true},
		{"m/.terraform.d", true},
		{"m/.Terraform.D", true},
		{".docker", true},
		{".git", true},
		{".git/hooks", true},
		{"x/.git/modules", true},
		{".config", true},
		{".config/gh", true},
		{".envrc", false}, // a file's name: nothing beneath it is protected
		{"m", false},      // m/.envrc's target has its own .envrc, protected too
		{".git/x", false},
		{".git/modules/sub/B/probe", false}, // git's symlink probe in a submodule's git dir
		{".git/modules/sub/hooks", true},
		{"", false},
	} {
		if got := m.ProtectedPrefix(tt.rel); got != tt.want {
			t.Errorf("ProtectedPrefix(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
	// Without **/ globs only the named directories are prefixes.
	p := &Policy{Version: 1, Symlinks: SymlinksInsideOnly, Protect: Protect{Paths: []string{"tools/run/*.sh", ".envrc"}}}
	pm := p.Matcher()
	for rel, want := range map[string]bool{"tools": true, "tools/run": true, "tools/other": false, "src": false, ".envrc": false} {
		if got := pm.ProtectedPrefix(rel); got != want {
			t.Errorf("tools policy: ProtectedPrefix(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestProtectGlobChecked(t *testing.T) {
	if _, err := Parse("p.yaml", []byte("version: 1\nprotect:\n  paths: ['{a/b,c}']\n")); err == nil {
		t.Error("a protect glob with / inside {} parsed")
	}
	if _, err := Parse("p.yaml", []byte("version: 1\nprotect:\n  bogus: 1\n")); err == nil {
		t.Error("an unknown protect field parsed")
	}
}
