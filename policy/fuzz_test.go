package policy

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/realm-dev/realm/errcode"
)

// FuzzParse: any input either parses to a valid policy that renders and
// parses back, or fails with SCHEMA_INVALID; never a panic or a hang.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"version: 1\n",
		"version: 1\ncredentials:\n  defaults: false\n  deny: ['secrets/**']\n  allow: ['**/.env.example']\n  hide: true\nsymlinks: inside-only\naudit: {path: /var/log/realm/audit.jsonl}\n",
		"version: 1\ncredentials: {deny: ['a/[']}\n",
		"version: 1\ncredentials:\n  deny:\n    - **/.env\n",
		"version: 1\ncredentials: {deny: &a ['x'], allow: *a}\n",
		"---\nversion: 1\n---\n",
		"",
		"version: !!str 1\n",
		"[1, 2, {a: b}]",
		"version: 1\naudit:\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c, _ := errcode.Of(err); c != errcode.SchemaInvalid {
				t.Fatalf("error without SCHEMA_INVALID: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "SCHEMA_INVALID: fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a policy Validate refuses: %v", err)
		}
		back, err := Parse("rendered.yaml", p.Render())
		if err != nil {
			t.Fatalf("rendered policy does not parse: %v\n%s", err, p.Render())
		}
		m1, m2 := p.Matcher(), back.Matcher()
		for _, rel := range []string{".env", "a/b/c.pem", "src/main.go", "secrets/x"} {
			if m1.Denied(rel) != m2.Denied(rel) {
				t.Fatalf("Denied(%q) differs after Render round trip", rel)
			}
		}
	})
}

// FuzzDenied: for any deny and allow glob and any path, Denied does not
// panic, and on a canonical path it agrees with the plain doublestar loop.
func FuzzDenied(f *testing.F) {
	for _, s := range []struct{ deny, allow, rel string }{
		{"secrets/**", "", "secrets/a/b"},
		{"**/*.pem", "config/test.pem", "config/test.pem"},
		{"**/key?.bin", "", "a/key1.bin"},
		{"**/.config/rclone/**", "", "h/.config/rclone/rclone.conf"},
		{"**/*.{crt,cer}", "**/ca.*", "x/ca.crt"},
		{"a/**/b/**", "", "a/x/b"},
		{"**/\\*", "", "x/*"},
		{"[", "", "["},
		{"", "", ""},
	} {
		f.Add(s.deny, s.allow, s.rel)
	}
	f.Fuzz(func(t *testing.T, deny, allow, rel string) {
		// Bound the work: doublestar backtracks, and a policy file is
		// written by the person who runs realm, not by an attacker.
		if len(deny) > 64 || len(allow) > 64 || len(rel) > 256 {
			return
		}
		var p Policy
		p.Credentials.Defaults = true
		if checkGlob(deny) == nil {
			p.Credentials.Deny = []string{deny}
		}
		if checkGlob(allow) == nil {
			p.Credentials.Allow = []string{allow}
		}
		m := p.Matcher()
		got := m.Denied(rel)
		if _, ok := m.Rule(rel); ok != got {
			t.Fatalf("deny=%q allow=%q: Denied(%q) = %v but Rule found one: %v", deny, allow, rel, got, ok)
		}
		if !canonical(rel) {
			return
		}
		// doublestar compares runes, so a U+FFFD in a glob matches any
		// invalid byte; Denied compares literals byte for byte, as
		// Linux does. Only that corner may differ.
		if !utf8.ValidString(rel) && strings.ContainsRune(deny+allow, utf8.RuneError) {
			return
		}
		if want := refDenied(&p, rel); got != want {
			t.Fatalf("deny=%q allow=%q: Denied(%q) = %v, reference %v", deny, allow, rel, got, want)
		}
	})
}

// canonical reports whether rel is a path Denied is specified for.
func canonical(rel string) bool {
	if rel == "" {
		return true
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
