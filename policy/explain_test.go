package policy

import (
	"strings"
	"testing"
)

// TestExplainAgreesWithMatcher: for every path of a corpus, under the
// built-in policy and a custom one, Explain names a rule exactly where the
// Matcher refuses, protects or coordinates.
func TestExplainAgreesWithMatcher(t *testing.T) {
	custom, err := Parse("p.yaml", []byte(`version: 1
credentials:
  deny: ["secrets/**", "**/*.key"]
  allow: ["secrets/public/**", "**/.env.example"]
protect:
  paths: ["tools/*.sh"]
  allow: ["tools/ok.sh"]
coordinated:
  paths: ["data/*.lmdb"]
`))
	if err != nil {
		t.Fatal(err)
	}
	segs := []string{".env", ".env.example", ".ENV", "id_rsa", "a.key", "secrets", "public", "src", "main.go",
		".git", "hooks", "pre-commit", "pre-commit.sample", ".envrc", "tools", "ok.sh", "run.sh", "data",
		"x.lmdb", "app.db", "app.db-wal", ".npmrc", ".docker", "config.json", "credentials.json", ".aws", "credentials"}
	var paths []string
	for _, a := range segs {
		paths = append(paths, a)
		for _, b := range segs {
			paths = append(paths, a+"/"+b)
			for _, c := range []string{"pre-commit", ".env", "x.lmdb", "main.go", "id_rsa"} {
				paths = append(paths, a+"/"+b+"/"+c)
			}
		}
	}
	for name, p := range map[string]*Policy{"built-in": Default(), "custom": custom} {
		m := p.Matcher()
		for _, rel := range paths {
			v := p.Explain(rel)
			if (v.Credential != nil) != m.Denied(rel) {
				t.Errorf("%s: %s: Explain credential %v, Matcher.Denied %v", name, rel, v.Credential, m.Denied(rel))
			}
			if (v.Protected != nil) != m.Protected(rel) {
				t.Errorf("%s: %s: Explain protected %v, Matcher.Protected %v", name, rel, v.Protected, m.Protected(rel))
			}
			if (v.Coordinated != nil) != m.Coordinated(rel) {
				t.Errorf("%s: %s: Explain coordinated %v, Matcher.Coordinated %v", name, rel, v.Coordinated, m.Coordinated(rel))
			}
		}
	}
}

func TestExplainNamesTheRule(t *testing.T) {
	p, err := Parse("p.yaml", []byte("version: 1\ncredentials:\n  deny: [\"secrets/**\"]\n  allow: [\"secrets/public/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rel, want string
	}{
		{".env", "cred **/.env built-in"},
		{"secrets/a", "cred secrets/** policy:p.yaml:3"},
		{"secrets/public/a", "allowed secrets/public/** policy:p.yaml:4"},
		{".git/hooks/pre-commit", "protected **/.git/hooks/** built-in"},
		{".git/hooks/pre-commit.sample", "exempt **/.git/**/hooks/*.sample built-in"},
		{"app.db-wal", "coordinated **/*-wal built-in"},
		{"src/main.go", ""},
	} {
		v := p.Explain(tc.rel)
		var got string
		pick := func(what string, r *Rule) {
			if r != nil && got == "" {
				src := r.Source
				if strings.HasPrefix(src, "built-in") {
					src = "built-in"
				}
				got = what + " " + r.Glob + " " + src
			}
		}
		pick("cred", v.Credential)
		pick("allowed", v.Allowed)
		pick("protected", v.Protected)
		pick("exempt", v.ProtectExempt)
		pick("coordinated", v.Coordinated)
		if got != tc.want {
			t.Errorf("Explain(%q) = %q, want %q (%+v)", tc.rel, got, tc.want, v)
		}
	}
}
