package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// refDenied is the specification Denied must agree with: a plain loop of
// doublestar.Match over every pattern, the deny globs folded against the
// folded path (and its segments without trailing dots and spaces), the
// allow globs as written.
func refDenied(p *Policy, rel string) bool {
	if rel == "" {
		return false
	}
	var deny []string
	if p.Credentials.Defaults {
		for _, g := range DefaultCredentialGlobs {
			deny = append(deny, g.Pattern)
		}
	}
	deny = append(deny, p.Credentials.Deny...)
	allow := p.Credentials.Allow
	if p.Credentials.Defaults {
		for _, g := range DefaultPublicGlobs {
			allow = append(allow, g.Pattern)
		}
	}
	denies := func(rel string) bool {
		f := fold(rel)
		for _, g := range deny {
			fg := fold(g)
			if checkGlob(fg) != nil {
				fg, f = g, rel // matched as written
			}
			for _, r := range []string{f, trimSegments(f)} {
				if ok, _ := doublestar.Match(fg, r); ok {
					return true
				}
			}
			f = fold(rel)
		}
		return false
	}
	allows := func(rel string) bool {
		for _, g := range allow {
			if ok, _ := doublestar.Match(g, rel); ok {
				return true
			}
		}
		return false
	}
	return denies(rel) && !allows(rel)
}

// defaultCases gives every built-in pattern a path it denies and a near miss
// it does not. TestDefaultGlobCases fails if a pattern has no entry.
var defaultCases = map[string]struct{ pos, neg string }{
	"**/.env":                               {"app/.env", "app/.envrc"},
	"**/.env.*":                             {".env.production", "app/env.local"},
	"**/.ssh/**":                            {"home/u/.ssh/config", "home/u/ssh/config"},
	"**/id_rsa*":                            {"keys/id_rsa.pub", "keys/my_id_rsa"},
	"**/id_dsa*":                            {"id_dsa", "keys/id-dsa"},
	"**/id_ecdsa*":                          {"a/b/id_ecdsa", "a/b/my_ID_ECDSA"},
	"**/id_ed25519*":                        {"x/id_ed25519_sk", "x/id_ed2551"},
	"**/*.pem":                              {"certs/server.pem", "certs/server.pem.txt"},
	"**/*.key":                              {"config/master.key", "config/master.keys"},
	"**/*.keypair":                          {"a.keypair", "a.keypairs"},
	"**/otr.private_key":                    {".purple/otr.private_key", "otr.private_keys"},
	"**/*.p12":                              {"a/b/c/cert.p12", "cert.p13"},
	"**/*.pfx":                              {"cert.PFX", "cert.PFX.txt"},
	"**/*.pkcs12":                           {"x.pkcs12", "x.pkcs1"},
	"**/*.jks":                              {"android/release.jks", "jks/readme"},
	"**/*.keystore":                         {"debug.keystore", "keystore.go"},
	"**/*.kdbx":                             {"vault/pw.kdbx", "vault/pw.kdbx.bak"},
	"**/*.kdb":                              {"pw.kdb", "pw.kdbm"},
	"**/*.agilekeychain":                    {"1p.agilekeychain", "agilekeychain"},
	"**/*.keychain":                         {"login.keychain", "login.keychain-db"},
	"**/*.keyring":                          {"login.keyring", "keyring.rs"},
	"**/*.kwallet":                          {"kdewallet.kwallet", "kwallet.cpp"},
	"**/*.psafe3":                           {"pw.psafe3", "pw.psafe"},
	"**/*.bek":                              {"recovery.bek", "recovery.bekx"},
	"**/.gnupg/**":                          {"home/.gnupg/pubring.kbx", "home/gnupg/pubring.kbx"},
	"**/.password-store/**":                 {".password-store/x.gpg", "password-store/x.gpg"},
	"**/.aws/**":                            {".aws/credentials", "aws/credentials"},
	"**/.config/gcloud/**":                  {"u/.config/gcloud/creds.db", "u/.config/gcloud2/x"},
	"**/.azure/**":                          {".azure/accessTokens.json", ".azure-pipelines/x.yml"},
	"**/.kube/**":                           {"u/.kube/config", "u/kube/config"},
	"**/.config/doctl/config.yaml":          {".config/doctl/config.yaml", "doctl/config.yaml"},
	"**/.boto":                              {"home/.boto", "home/boto"},
	"**/.s3cfg":                             {".s3cfg", "s3cfg"},
	"**/.vault-token":                       {"u/.vault-token", "u/.vault-tokens"},
	"**/terraform.tfvars":                   {"infra/terraform.tfvars", "infra/terraform.tfvars.json"},
	"**/.terraformrc":                       {".terraformrc", "terraformrc"},
	"**/.terraform.d/credentials.tfrc.json": {"u/.terraform.d/credentials.tfrc.json", "u/credentials.tfrc.json"},
	"**/.docker/config.json":                {"u/.docker/config.json", "u/docker/config.json"},
	"**/.dockercfg":                         {".dockercfg", ".dockercfg.sample"},
	"**/.config/containers/auth.json":       {".config/containers/auth.json", "containers/auth.json"},
	"**/.npmrc":                             {"web/.npmrc", "web/npmrc"},
	"**/.pypirc":                            {".pypirc", "pypirc.md"},
	"**/.cargo/credentials.toml":            {".cargo/credentials.toml", ".cargo/config.toml"},
	"**/.gem/credentials":                   {"u/.gem/credentials", "u/gem/credentials"},
	"**/.git-credentials":                   {".git-credentials", ".gitconfig"},
	"**/.config/gh/hosts.yml":               {"u/.config/gh/hosts.yml", "u/.config/gh/config.yml"},
	"**/.config/hub":                        {".config/hub", ".config/hubble"},
	"**/.netrc":                             {"u/.netrc", "u/netrc"},
	"**/_netrc":                             {"_netrc", "x_netrc"},
	"**/.pgpass":                            {"db/.pgpass", "db/pgpass"},
	"**/.htpasswd":                          {"www/.htpasswd", "www/.htaccess"},
	"**/*.ovpn":                             {"vpn/client.ovpn", "vpn/ovpn.md"},
}

func TestDefaultGlobCases(t *testing.T) {
	// Each pattern alone: its positive matches, its negative does not.
	seen := make(map[string]bool)
	for _, g := range DefaultCredentialGlobs {
		if seen[g.Pattern] {
			t.Errorf("%q is listed twice", g.Pattern)
		}
		seen[g.Pattern] = true
		if err := checkGlob(g.Pattern); err != nil {
			t.Errorf("%q: %v", g.Pattern, err)
		}
		if g.Source == "" {
			t.Errorf("%q has no source", g.Pattern)
		}
		c, ok := defaultCases[g.Pattern]
		if !ok {
			t.Errorf("%q has no test case in defaultCases", g.Pattern)
			continue
		}
		m := (&Policy{Credentials: Credentials{Deny: []string{g.Pattern}}}).Matcher()
		if !m.Denied(c.pos) {
			t.Errorf("%q alone: Denied(%q) = false, want true", g.Pattern, c.pos)
		}
		if m.Denied(c.neg) {
			t.Errorf("%q alone: Denied(%q) = true, want false", g.Pattern, c.neg)
		}
	}
	for p := range defaultCases {
		if !seen[p] {
			t.Errorf("defaultCases has %q, which is not a default pattern", p)
		}
	}
	// With the whole set, every positive is still denied.
	m := Default().Matcher()
	for p, c := range defaultCases {
		if !m.Denied(c.pos) {
			t.Errorf("default policy: Denied(%q) = false (pattern %q)", c.pos, p)
		}
	}
}

// TestDefaultGlobsAreFast keeps the built-in set on the fast paths: none of it
// may need the general glob engine on every lookup.
func TestDefaultGlobsAreFast(t *testing.T) {
	m := Default().Matcher()
	if n := len(m.deny.general) + len(m.deny.baseGlobs); n != 0 {
		t.Errorf("default set has %d patterns on the slow path: %q %q", n, m.deny.general, m.deny.baseGlobs)
	}
}

func TestDenied(t *testing.T) {
	tests := []struct {
		name        string
		defaults    bool
		deny, allow []string
		rel         string
		want        bool
	}{
		{"root never denied", true, []string{"**"}, nil, "", false},
		{"innocent file", true, nil, nil, "src/net/http/server.go", false},
		{"env at root", true, nil, nil, ".env", true},
		{"env deep", true, nil, nil, "a/b/c/d/e/f/.env", true},
		{"ssh dir itself", true, nil, nil, "home/.ssh", true},
		{"ssh nested", true, nil, nil, "a/b/.ssh/keys/old/id", true},
		{"defaults off", false, nil, nil, "a/.env", false},

		// Deny globs match case-insensitively (Unicode simple case
		// folding, ignorable code points dropped, trailing dots and spaces
		// of a segment ignored), as vfat, exFAT, ntfs-3g and ext4 casefold
		// resolve names; allow globs match as written.
		{"upper ext", true, nil, nil, "cert.PEM", true},
		{"upper name", true, nil, nil, "A/.ENV", true},
		{"mixed name", true, nil, nil, "A/.eNv", true},
		{"upper dir", true, nil, nil, ".SSH/config", true},
		{"upper key", true, nil, nil, ".SSH/ID_RSA", true},
		{"upper env suffix", true, nil, nil, ".ENV.LOCAL", true},
		{"kelvin sign", true, nil, nil, "a/.\u212Aube/config", true},
		{"long s", true, nil, nil, "a/.\u017Fsh/id", true},
		{"zero width joiner", true, nil, nil, ".e\u200Dnv", true},
		{"byte order mark", true, nil, nil, "\uFEFF.env", true},
		{"trailing dot", true, nil, nil, "server.pem.", true},
		{"trailing dots and spaces", true, nil, nil, "x/.env. . ", true},
		{"trailing dot of a dir", true, nil, nil, ".ssh./config", true},
		{"dots only kept", true, nil, nil, "...", false},
		{"upper deny glob", false, []string{"Secrets/**"}, nil, "SECRETS/a", true},
		{"upper class", false, []string{"**/key[A-C].bin"}, nil, "x/keyb.bin", true},
		{"folded class that reverses is matched as written", false, []string{"**/x[Z-a]"}, nil, "x_", true},
		{"not near misses", true, nil, nil, "A/.ENVRC", false},
		{"allow is case-sensitive", true, nil, []string{"testdata/**"}, "TESTDATA/id_rsa", true},
		{"allow as written", true, nil, []string{"testdata/**"}, "testdata/id_rsa", false},
		{"public exception is case-sensitive", true, nil, nil, "x/certifi/CACERT.PEM", true},

		// ** at the start, middle and end.
		{"** start matches root", false, []string{"**/secret.txt"}, nil, "secret.txt", true},
		{"** start matches deep", false, []string{"**/secret.txt"}, nil, "a/b/secret.txt", true},
		{"** start is whole segments", false, []string{"**/secret.txt"}, nil, "a/mysecret.txt", false},
		{"** middle zero segments", false, []string{"config/**/prod.yml"}, nil, "config/prod.yml", true},
		{"** middle many segments", false, []string{"config/**/prod.yml"}, nil, "config/a/b/prod.yml", true},
		{"** middle anchored", false, []string{"config/**/prod.yml"}, nil, "x/config/prod.yml", false},
		{"** end matches dir", false, []string{"secrets/**"}, nil, "secrets", true},
		{"** end matches below", false, []string{"secrets/**"}, nil, "secrets/a/b", true},
		{"** end anchored", false, []string{"secrets/**"}, nil, "app/secrets/x", false},
		{"** end not a prefix", false, []string{"secrets/**"}, nil, "secretsx/a", false},

		// * and ?.
		{"* within segment", false, []string{"logs/*.txt"}, nil, "logs/a.txt", true},
		{"* not across /", false, []string{"logs/*.txt"}, nil, "logs/a/b.txt", false},
		{"? one char", false, []string{"**/key?.bin"}, nil, "a/key1.bin", true},
		{"? not zero chars", false, []string{"**/key?.bin"}, nil, "a/key.bin", false},
		{"? not two chars", false, []string{"**/key?.bin"}, nil, "a/key12.bin", false},
		{"? not /", false, []string{"a?b"}, nil, "a/b", false},
		{"class", false, []string{"**/v[0-9].key.txt"}, nil, "x/v3.key.txt", true},
		{"alternatives", false, []string{"**/*.{crt,cer}"}, nil, "x/a.cer", true},

		// deny adds, allow overrides.
		{"deny adds", true, []string{"private/**"}, nil, "private/notes.md", true},
		{"deny adds, others unaffected", true, []string{"private/**"}, nil, "public/notes.md", false},
		{"allow overrides built-in", true, nil, []string{"**/.env.example"}, "app/.env.example", false},
		{"allow is exact", true, nil, []string{"**/.env.example"}, "app/.env.local", true},
		{"allow overrides deny", true, []string{"config/*.pem"}, []string{"config/test.pem"}, "config/test.pem", false},
		{"allow leaves rest denied", true, []string{"config/*.pem"}, []string{"config/test.pem"}, "config/prod.pem", true},
		{"allow dir", true, nil, []string{"testdata/**"}, "testdata/keys/id_rsa", false},
		{"allow without deny", true, nil, []string{"**"}, "src/main.go", false},
		{"literal anchored", false, []string{"config/master.key"}, nil, "config/master.key", true},
		{"literal anchored not deep", false, []string{"config/master.key"}, nil, "a/config/master.key", false},
		{"tail", false, []string{"**/conf/db.yml"}, nil, "a/conf/db.yml", true},
		{"tail whole segment", false, []string{"**/conf/db.yml"}, nil, "a/myconf/db.yml", false},
		{"seq", false, []string{"**/.config/rclone/**"}, nil, "h/.config/rclone/rclone.conf", true},
		{"seq whole segments", false, []string{"**/.config/rclone/**"}, nil, "h/x.config/rclone/r", false},
		{"non-UTF-8 name", true, nil, nil, "a/\xff.pem", true},

		// Public CA bundles the built-in set would deny by extension.
		{"certifi's bundle", true, nil, nil, "venv/lib/python3.11/site-packages/certifi/cacert.pem", false},
		{"pip's vendored certifi", true, nil, nil, "venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem", false},
		{"botocore's bundle", true, nil, nil, ".venv/lib/python3.12/site-packages/botocore/cacert.pem", false},
		{"grpc's roots", true, nil, nil, "venv/lib/python3.12/site-packages/grpc/_cython/_credentials/roots.pem", false},
		{"other pem beside certifi", true, nil, nil, "venv/lib/python3.11/site-packages/certifi/server.pem", true},
		{"cacert.pem elsewhere", true, nil, nil, "certs/cacert.pem", true},

		// Example environment files are never credentials.
		{"env example", true, nil, nil, ".env.example", false},
		{"env sample deep", true, nil, nil, "app/config/.env.sample", false},
		{"env template", true, nil, nil, "svc/.env.template", false},
		{"env dist", true, nil, nil, ".env.dist", false},
		{"env example, upper", true, nil, nil, ".ENV.EXAMPLE", true},
		{"env example backup", true, nil, nil, ".env.example.bak", true},
		{"env local", true, nil, nil, ".env.local", true},
		{"env examples", true, nil, nil, ".env.examples", true},
		{"example exemption needs the defaults", false, []string{"**/.env.*"}, nil, ".env.example", true},
		{"public exception needs the defaults", false, []string{"**/*.pem"}, nil, "x/certifi/cacert.pem", true},
		{"deny cannot take the exception back", true, []string{"**/certifi/**"}, nil, "x/certifi/cacert.pem", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Version: 1, Symlinks: SymlinksInsideOnly,
				Credentials: Credentials{Defaults: tt.defaults, Deny: tt.deny, Allow: tt.allow}}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := p.Matcher().Denied(tt.rel); got != tt.want {
				t.Errorf("Denied(%q) = %v, want %v", tt.rel, got, tt.want)
			}
			if got := refDenied(p, tt.rel); got != tt.want {
				t.Errorf("reference Denied(%q) = %v, want %v (the table is wrong)", tt.rel, got, tt.want)
			}
		})
	}
}

func TestHide(t *testing.T) {
	if Default().Matcher().Hide() {
		t.Error("default policy hides")
	}
	p := Default()
	p.Credentials.Hide = true
	if !p.Matcher().Hide() {
		t.Error("hide: true does not hide")
	}
	var m *Matcher
	if m.Hide() || !m.Denied(".env") {
		t.Error("nil Matcher does not act as the default policy")
	}
}

func TestMatcherFailsClosed(t *testing.T) {
	p := &Policy{Credentials: Credentials{Deny: []string{"a/["}, Allow: []string{"b/["}}}
	m := p.Matcher()
	if !m.Denied("anything/at/all") {
		t.Error("a bad deny glob does not deny everything")
	}
}

// equivalencePatterns exercise every shape the matcher sorts patterns into.
var equivalencePatterns = []string{
	"**/.env", "**/*.pem", "**/*.tar.gz", "**/*z", "**/id_*", "**/.ssh/**",
	"**/.config/gcloud/**", "**/.docker/config.json", "secrets/**", "a/b",
	"config/**/prod.yml", "**/key?.bin", "**/*.{crt,cer}", "**/v[0-9]*", "**",
	"**/*", "*", "a/*/c", "**/a/**/b", "x/**/y/**", "**/b/**", "a/**",
	"**/[a-c]/**", "**/a*b/c", "a", "**/a", "**/a/b/**", "\\*", "**/\\?x",
}

func equivalencePaths() []string {
	paths := []string{
		"a", "b", "a/b", "a/b/c", "b/a", ".env", "x/.env", ".envx", "x/.env/y",
		"a.pem", "x/y/z.pem", ".pem", "pem", "a.tar.gz", "x/b.gz", "z", "xz",
		"id_rsa", "x/id_", "id", ".ssh", "x/.ssh", "x/.ssh/y", ".sshx/y",
		".config/gcloud", "x/.config/gcloud/y", "x/.config/gcloudy", "y.config/gcloud/z",
		".docker/config.json", "u/.docker/config.json", "docker/config.json",
		"secrets", "secrets/x", "x/secrets/y", "secretsx", "config/prod.yml",
		"config/a/b/prod.yml", "x/config/prod.yml", "key1.bin", "k/key12.bin",
		"a.crt", "a.cer", "a.cex", "v1", "x/v9abc", "vx", "a/x/c", "a/x/y/c",
		"q/a/r/s/b", "x/q/y", "x/y", "c", "q/c/r", "aXb/c", "ab/c", "*", "x/?x", "?x",
		"src/net/http/server.go", "a/b/.ssh/config", "α/β.pem", "a/\xff", "a/\xff.pem",
	}
	// Deeper variants of each.
	n := len(paths)
	for _, p := range paths[:n] {
		paths = append(paths, "d1/"+p, "d1/d2/d3/"+p, p+"/tail")
	}
	return paths
}

// TestFastPathEquivalence holds the fast paths against doublestar for every
// pattern shape, alone and combined, with and without the defaults.
func TestFastPathEquivalence(t *testing.T) {
	paths := equivalencePaths()
	for _, defaults := range []bool{false, true} {
		for i, pat := range equivalencePatterns {
			allow := equivalencePatterns[(i+7)%len(equivalencePatterns)]
			for _, p := range []*Policy{
				{Credentials: Credentials{Defaults: defaults, Deny: []string{pat}}},
				{Credentials: Credentials{Defaults: defaults, Deny: []string{pat}, Allow: []string{allow}}},
			} {
				m := p.Matcher()
				for _, rel := range paths {
					if got, want := m.Denied(rel), refDenied(p, rel); got != want {
						t.Errorf("defaults=%v deny=%q allow=%q: Denied(%q) = %v, reference %v",
							defaults, p.Credentials.Deny, p.Credentials.Allow, rel, got, want)
					}
				}
			}
		}
	}
	all := &Policy{Credentials: Credentials{Defaults: true, Deny: equivalencePatterns[:10]}}
	m := all.Matcher()
	for _, rel := range paths {
		if got, want := m.Denied(rel), refDenied(all, rel); got != want {
			t.Errorf("all patterns: Denied(%q) = %v, reference %v", rel, got, want)
		}
	}
}

var benchPaths = []string{
	"src/net/http/server.go",
	"a/b/.ssh/config",
	"internal/fusefs/node/lookup_test.go",
	"web/node_modules/react-dom/cjs/react-dom.development.js",
	"docs/design/2024/q3/review/notes/final/summary.md",
	"cmd/realmfs/main.go",
	"vendor/github.com/x/y/z/w/v/u.go",
	"services/api/config/prod/settings.yaml",
}

var sink bool

func BenchmarkDenied(b *testing.B) {
	m := Default().Matcher()
	for _, rel := range benchPaths {
		name := fmt.Sprintf("depth%d/%s", strings.Count(rel, "/")+1, rel[strings.LastIndexByte(rel, '/')+1:])
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				sink = m.Denied(rel)
			}
		})
	}
	b.Run("mixed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sink = m.Denied(benchPaths[i%len(benchPaths)])
			i++
		}
	})
}

// BenchmarkDeniedReference is the naive loop, for comparison.
func BenchmarkDeniedReference(b *testing.B) {
	p := Default()
	b.Run("mixed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sink = refDenied(p, benchPaths[i%len(benchPaths)])
			i++
		}
	})
}

// TestFastPathRandom compares Denied with the reference on random patterns
// and paths built from the pieces the built-in set uses, so that the fast
// paths meet near misses as well as hits.
func TestFastPathRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	segs := []string{".ssh", ".env", ".env.local", "id_rsa.pub", "a.pem", ".pem", "x", "config.json",
		".docker", ".config", "gcloud", "secrets", "a", "b", "key1.bin", "v1", "src", "ab", "ba"}
	atoms := []string{"**", "*", "*.pem", ".ssh", ".env.*", "id_rsa*", "a", "b", "?", "key?.bin",
		".docker", "config.json", ".config", "gcloud", "[ab]", "{a,b}", "a*b", "secrets", "*.json"}
	pick := func(list []string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = list[r.IntN(len(list))]
		}
		return strings.Join(parts, "/")
	}
	paths := make([]string, 400)
	for i := range paths {
		paths[i] = pick(segs, 1+r.IntN(6))
	}
	for range 300 {
		deny := []string{pick(atoms, 1+r.IntN(4)), pick(atoms, 1+r.IntN(4))}
		allow := []string{pick(atoms, 1+r.IntN(4))}
		p := &Policy{Version: 1, Symlinks: SymlinksInsideOnly,
			Credentials: Credentials{Defaults: r.IntN(2) == 0, Deny: deny, Allow: allow}}
		if p.Validate() != nil {
			continue
		}
		m := p.Matcher()
		for _, rel := range paths {
			if got, want := m.Denied(rel), refDenied(p, rel); got != want {
				t.Fatalf("deny=%q allow=%q defaults=%v: Denied(%q) = %v, reference %v",
					deny, allow, p.Credentials.Defaults, rel, got, want)
			}
			if r, ok := m.Rule(rel); ok != m.Denied(rel) || ok && !refDenied(&Policy{Credentials: Credentials{Deny: []string{r.Glob}}}, rel) {
				t.Fatalf("deny=%q allow=%q defaults=%v: Rule(%q) = %+v, %v, which does not deny it alone",
					deny, allow, p.Credentials.Defaults, rel, r, ok)
			}
		}
	}
}

// TestRuleNamesGlobAndSource: a refusal's rule is the deny glob that
// matched and where it was written: the built-in set's source as
// --show-policy prints it, or the policy file and line of a deny glob.
func TestRuleNamesGlobAndSource(t *testing.T) {
	p, err := Parse("/etc/realm/p.yaml", []byte("version: 1\ncredentials:\n  deny:\n    - 'secrets/**'\n    - '**/*.secret'\n  allow: ['**/ok.secret']\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Matcher()
	for _, tt := range []struct {
		rel  string
		want Rule
	}{
		{".env", Rule{"**/.env", "built-in: realm, shhgit, agentsh"}},
		{"app/.ENV", Rule{"**/.env", "built-in: realm, shhgit, agentsh"}},
		{"home/.ssh/id_rsa", Rule{"**/.ssh/**", "built-in: realm, agentsh"}},
		{"secrets/db", Rule{"secrets/**", "policy:/etc/realm/p.yaml:4"}},
		{"x/y/db.secret", Rule{"**/*.secret", "policy:/etc/realm/p.yaml:5"}},
		{"x/ok.secret", Rule{}},
		{".env.example", Rule{}},
		{"src/main.go", Rule{}},
		{"", Rule{}},
	} {
		got, ok := m.Rule(tt.rel)
		if got != tt.want || ok != (tt.want != Rule{}) {
			t.Errorf("Rule(%q) = %+v, %v; want %+v", tt.rel, got, ok, tt.want)
		}
	}
	// A Policy built in code has no lines; a nil Matcher is the default.
	code := (&Policy{Credentials: Credentials{Deny: []string{"**/*.tok"}}}).Matcher()
	if got, _ := code.Rule("a.tok"); got != (Rule{"**/*.tok", "policy"}) {
		t.Errorf("Rule of a glob built in code = %+v", got)
	}
	if got, _ := (*Matcher)(nil).Rule("id_rsa"); got.Glob != "**/id_rsa*" {
		t.Errorf("nil Matcher's Rule(id_rsa) = %+v", got)
	}
}

// TestHasBraces: the patterns doublestar matches differently by where
// they are cut have a brace group, found outside classes and escapes only.
func TestHasBraces(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    bool
	}{
		{"**/0*{}", true},
		{"**/0*{*}", true},
		{"**/.env{,.local}", true},
		{"**/*.{crt,cer}", true},
		{"a,b", false},
		{"\\{}", false},
		{"[{}]x", false},
		{"[]{}]", false},
		{"[!{]{}", true},
		{"**/.env", false},
		{"", false},
	} {
		if got := hasBraces(tc.pattern); got != tc.want {
			t.Errorf("hasBraces(%q) = %v, want %v", tc.pattern, got, tc.want)
		}
	}
}
