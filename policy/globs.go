package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// Glob is one credential pattern and where it came from, so that a person
// reading --show-policy or docs/policy.md can judge each entry.
type Glob struct {
	Pattern string // doublestar glob on the workspace-relative path
	Source  string // who names this file a credential: realm, shhgit, gitleaks, agentsh, a tool's docs
}

// DefaultCredentialGlobs is the built-in credential set, applied when a
// policy has credentials.defaults: true (the default). It is frozen: adding
// a pattern denies files that agents could read before, so every change is a
// reviewed, documented change to realm's behaviour.
//
// The list is every pattern of realm's own starting set plus file names that
// public secret scanners and agent sandboxes name as credentials by path
// alone. Sources:
//
//   - realm: realm's own starting set (its design's list of credential paths).
//   - shhgit: eth0izzle/shhgit config.yaml, "part: filename/extension/path" signatures.
//   - gitleaks: the path-only rule pkcs12-file.
//   - agentsh: canyonroad/agentsh configs/policies/default.yaml deny rules.
//   - Terraform CLI docs, gsutil/boto docs: where those tools keep tokens.
//
// Left out on purpose, because they are too broad for a source tree: agentsh's
// **/secrets/** and **/credentials/** (Go and Python packages use those
// names), **/.git/config (git needs it), shhgit's *.asc, *.sqlite, *.log,
// database.yml, settings.py and shell rc files, and a general **/id_*.
var DefaultCredentialGlobs = []Glob{
	// Environment files.
	{"**/.env", "realm, shhgit, agentsh"},
	{"**/.env.*", "realm, agentsh"},

	// SSH and private keys.
	{"**/.ssh/**", "realm, agentsh"},
	{"**/id_rsa*", "realm, shhgit"},
	{"**/id_dsa*", "realm, shhgit"},
	{"**/id_ecdsa*", "realm, shhgit"},
	{"**/id_ed25519*", "realm, shhgit"},
	{"**/*.pem", "realm, shhgit"},
	{"**/*.key", "realm, shhgit"},
	{"**/*.keypair", "shhgit"},
	{"**/otr.private_key", "shhgit"},

	// Key stores and certificate bundles.
	{"**/*.p12", "realm, gitleaks, shhgit"},
	{"**/*.pfx", "realm, gitleaks, shhgit"},
	{"**/*.pkcs12", "shhgit"},
	{"**/*.jks", "realm, shhgit"},
	{"**/*.keystore", "realm, shhgit"},

	// Password managers and OS key rings.
	{"**/*.kdbx", "shhgit"},
	{"**/*.kdb", "shhgit"},
	{"**/*.agilekeychain", "shhgit"},
	{"**/*.keychain", "shhgit"},
	{"**/*.keyring", "shhgit"},
	{"**/*.kwallet", "shhgit"},
	{"**/*.psafe3", "shhgit"},
	{"**/*.bek", "shhgit"},
	{"**/.gnupg/**", "realm"},
	{"**/.password-store/**", "realm"},

	// Cloud and cluster credentials.
	{"**/.aws/**", "realm, shhgit, agentsh"},
	{"**/.config/gcloud/**", "realm, agentsh"},
	{"**/.azure/**", "realm, agentsh"},
	{"**/.kube/**", "realm"},
	{"**/.config/doctl/config.yaml", "shhgit"},
	{"**/.boto", "gsutil/boto docs"},
	{"**/.s3cfg", "realm, shhgit"},
	{"**/.vault-token", "realm"},
	{"**/terraform.tfvars", "realm, shhgit"},
	{"**/.terraformrc", "Terraform CLI docs"},
	{"**/.terraform.d/credentials.tfrc.json", "Terraform CLI docs"},

	// Registries and containers.
	{"**/.docker/config.json", "realm"},
	{"**/.dockercfg", "shhgit"},
	{"**/.config/containers/auth.json", "realm"},
	{"**/.npmrc", "realm, shhgit"},
	{"**/.pypirc", "realm"},
	{"**/.cargo/credentials.toml", "realm"},
	{"**/.gem/credentials", "shhgit"},

	// Git hosting and login files.
	{"**/.git-credentials", "realm, shhgit, agentsh"},
	{"**/.config/gh/hosts.yml", "realm"},
	{"**/.config/hub", "shhgit"},
	{"**/.netrc", "realm, shhgit"},
	{"**/_netrc", "realm, shhgit"},
	{"**/.pgpass", "realm, shhgit"},
	{"**/.htpasswd", "realm, shhgit"},
	{"**/*.ovpn", "shhgit"},
}

// DefaultPublicGlobs are files the built-in set would deny by their name
// that are public by construction: the CA bundles package managers ship and
// read to verify TLS (denied, `pip install` fails inside a virtualenv on the
// mount, since pip vendors certifi, as does every program that uses
// requests, botocore or gRPC from one), and the example environment files
// projects commit so that people know which variables to set (dotenv,
// Symfony's .env.dist). Like allow globs they match the path as written
// (.env.EXAMPLE stays denied). They are allowed whenever
// the built-in set is applied; a policy's deny cannot take them back
// (allow wins), so a policy that must deny them sets defaults: false.
var DefaultPublicGlobs = []Glob{
	{"**/certifi/cacert.pem", "certifi: Mozilla's CA bundle, vendored by pip and requests"},
	{"**/botocore/cacert.pem", "botocore: its CA bundle"},
	{"**/grpc/_cython/_credentials/roots.pem", "grpcio: its root certificates"},
	{"**/.env.example", "an example environment file, committed to the repository"},
	{"**/.env.sample", "an example environment file, committed to the repository"},
	{"**/.env.template", "an example environment file, committed to the repository"},
	{"**/.env.dist", "Symfony's committed defaults (.env.dist)"},
}

// maxGlobLen bounds one pattern; doublestar backtracks, and no credential
// path needs more.
const maxGlobLen = 1024

// checkGlob reports why pattern cannot be a credential glob. Beyond
// doublestar's syntax it refuses patterns that could never match a canonical
// workspace-relative path (leading slash, empty, "." or ".." segments), so
// that a typo fails loudly instead of silently denying nothing.
func checkGlob(pattern string) error {
	switch {
	case pattern == "":
		return fmt.Errorf("empty glob")
	case len(pattern) > maxGlobLen:
		return fmt.Errorf("glob longer than %d bytes", maxGlobLen)
	case !utf8.ValidString(pattern):
		return fmt.Errorf("glob %q is not valid UTF-8", pattern)
	case !doublestar.ValidatePattern(pattern):
		return fmt.Errorf("bad glob %q: %w", pattern, doublestar.ErrBadPattern)
	case strings.HasPrefix(pattern, "/"):
		return fmt.Errorf("glob %q must be relative to the workspace (no leading /)", pattern)
	}
	if err := checkRanges(pattern); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(pattern, "/") {
		switch seg {
		case "":
			return fmt.Errorf("glob %q has an empty path segment", pattern)
		case ".", "..":
			return fmt.Errorf("glob %q has a %q segment; paths are canonical", pattern, seg)
		}
	}
	return nil
}

// checkRanges refuses a character class with a range whose end comes
// before its start ([z-a]): doublestar accepts it, and it matches nothing,
// which in a deny glob silently denies nothing.
func checkRanges(pattern string) error {
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(rs) && (rs[j] == '!' || rs[j] == '^') {
				j++
			}
			for ; j < len(rs) && rs[j] != ']'; j++ {
				lo := rs[j]
				if lo == '\\' && j+1 < len(rs) {
					j++
					lo = rs[j]
				}
				if j+2 < len(rs) && rs[j+1] == '-' && rs[j+2] != ']' {
					j += 2
					hi := rs[j]
					if hi == '\\' && j+1 < len(rs) {
						j++
						hi = rs[j]
					}
					if hi < lo {
						return fmt.Errorf("glob %q has the range %c-%c, which is empty (its end comes before its start)", pattern, lo, hi)
					}
				}
			}
			i = j
		}
	}
	return nil
}
