package policy

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Protected paths. A credential is host data a process on the mount must
// not read; a protected path is host configuration it must not write: a
// file that a program of the host executes or trusts when it works in the
// workspace (git runs .git/hooks/pre-commit, direnv runs .envrc, docker runs
// the credential helper .docker/config.json names). Reading one stays
// allowed; making, writing, truncating, renaming onto, linking to and
// changing the metadata of one are refused.

// DefaultProtectGlobs is the built-in protect set, applied when a policy
// has protect.defaults: true (the default). Frozen like the credential set:
// each entry names the tool that executes or trusts the file.
//
// Left out on purpose, because tools write them through the mount as part
// of their ordinary work, or projects commit them (a protected committed
// file makes `git clone` of the project fail): .git/config (git writes it on
// clone, fetch, `git config` and `git remote`), .vscode/tasks.json, .yarnrc.yml,
// .cargo/config.toml, .pre-commit-config.yaml, Makefile and every build file.
// A host that runs git, cargo or an editor on the workspace unattended adds
// the ones it trusts (see the threat model, docs/threat-model.md).
var DefaultProtectGlobs = []Glob{
	// Git hooks: git runs $GIT_DIR/hooks/<name> on commit, merge,
	// checkout, rebase and push, as the user running git.
	{"**/.git/hooks/**", "githooks(5): git runs $GIT_DIR/hooks/<name>"},
	{"**/.git/modules/**/hooks/**", "githooks(5), gitsubmodules(7): a submodule's hooks in its git dir"},
	// Shell environment.
	{"**/.envrc", "direnv(1): executes .envrc when a shell enters the directory (once allowed)"},
	{".bashrc", "bash(1): read by every interactive shell of a home-directory workspace"},
	{".bash_profile", "bash(1): read by login shells of a home-directory workspace"},
	{".profile", "bash(1), dash(1): read by login shells of a home-directory workspace"},
	{".zshrc", "zsh(1): read by interactive shells of a home-directory workspace"},
	{".zshenv", "zsh(1): read by every zsh of a home-directory workspace"},
	// Registries and their credential helpers.
	{"**/.docker/config.json", "docker login docs: credsStore and credHelpers name a program docker runs"},
	{"**/.npmrc", "npm config docs: registry, tokens, script-shell and node-options of every npm command run there"},
	{"**/.pypirc", "twine, distutils docs: where uploads go and with which credentials"},
	{"**/.cargo/credentials", "Cargo docs: registry tokens (the name before 1.39)"},
	{"**/.cargo/credentials.toml", "Cargo docs: registry tokens and credential-provider programs"},
	{"**/.config/gh/**", "gh CLI docs: hosts.yml tokens, config.yml aliases that run shell commands"},
	{"**/.terraformrc", "Terraform CLI docs: provider installation and credential helpers"},
	{"**/.terraform.d/credentials.tfrc.json", "Terraform CLI docs: API tokens per host"},
	{"**/.git-credentials", "git-credential-store(1): logins git sends to a host"},
	{"**/.netrc", "curl(1), git, ftp: logins sent to a host"},
}

// DefaultProtectExceptions are names the built-in protect set covers that
// no tool executes: git writes its sample hooks into every new repository
// (`git clone`, `git init`), and runs a hook only by its exact name
// (pre-commit, never pre-commit.sample). Renaming a sample onto a hook's
// name is still refused: the new name is protected.
var DefaultProtectExceptions = []Glob{
	{"**/.git/**/hooks/*.sample", "git's template hooks: written on clone and init, never run"},
}

// checkProtectGlob is checkGlob for a protect glob, which must also be
// checked against a path's directory prefixes (ProtectedPrefix), one
// segment at a time: an alternative may not span segments.
func checkProtectGlob(pattern string) error {
	if err := checkGlob(pattern); err != nil {
		return err
	}
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case '/':
			if depth > 0 {
				return fmt.Errorf("protect glob %q has a / inside {}; write one glob per alternative", pattern)
			}
		}
	}
	return nil
}

// protectSet is the compiled protect rule of a Matcher.
type protectSet struct {
	globs  globSet    // folded
	allow  globSet    // as written
	folded [][]string // the folded globs split into segments, for prefix
	on     bool       // any glob at all
}

func (s *protectSet) add(g string) {
	if checkProtectGlob(g) != nil {
		s.globs.all = true // fail closed
		s.on = true
		return
	}
	f := fold(g)
	if !s.globs.add(f) {
		s.globs.all = true
	}
	s.folded = append(s.folded, strings.Split(f, "/"))
	s.on = true
}

// Protected reports whether rel is a protected path: a protect glob
// matches it (folded, as deny globs are: a case-insensitive backing
// filesystem resolves .ENVRC to .envrc) and no protect exception matches
// it as written. "" (the root) is never protected.
func (m *Matcher) Protected(rel string) bool {
	if m == nil {
		m = defaultMatcher()
	}
	p := &m.protect
	if !p.on || rel == "" {
		return false
	}
	f := fold(rel)
	hit := p.globs.match(f)
	if !hit {
		if t := trimSegments(f); t != f {
			hit = p.globs.match(t)
		}
	}
	return hit && !p.allow.match(rel)
}

// ProtectedPrefix reports whether a symlink named rel could lead a host's
// program that reads a protected path to a file whose own path is not
// protected, so that the protect check of that file does not see it (ln -s
// tf .terraform.d, then write tf/credentials.tfrc.json, which the host's
// terraform reads as .terraform.d/credentials.tfrc.json). That is so when
// rel matches a proper prefix of a protect glob whose last segment, the
// symlink's own name, meets a named segment of the glob (.terraform.d,
// .git, hooks), not a **: a symlink named m beneath which m/.envrc would
// be protected leads to a target whose .envrc is protected by **/.envrc
// too, and one git makes in .git/modules/sub/ to probe for symlink support
// leads nowhere a hook is looked for.
func (m *Matcher) ProtectedPrefix(rel string) bool {
	if m == nil {
		m = defaultMatcher()
	}
	p := &m.protect
	if !p.on || rel == "" {
		return false
	}
	if p.globs.all {
		return true
	}
	f := fold(rel)
	for _, segs := range [][]string{strings.Split(f, "/"), strings.Split(trimSegments(f), "/")} {
		for _, g := range p.folded {
			steps := 0
			if prefixMatch(g, segs, false, &steps) {
				return true
			}
		}
	}
	return false
}

// maxPrefixSteps bounds prefixMatch's backtracking over ** segments.
const maxPrefixSteps = 1024

// prefixMatch reports whether the path segments s are matched by a proper
// prefix of the glob segments g (some path s/... can match g) in a way
// that matches the last of s with a segment of g other than ** (named: the
// last segment consumed was).
func prefixMatch(g, s []string, named bool, steps *int) bool {
	if *steps++; *steps > maxPrefixSteps {
		return true // fail closed
	}
	if len(s) == 0 {
		return named && len(g) > 0
	}
	if len(g) == 0 {
		return false
	}
	if g[0] == "**" {
		return prefixMatch(g[1:], s, named, steps) || prefixMatch(g, s[1:], false, steps)
	}
	ok, err := doublestar.Match(g[0], s[0])
	return ok && err == nil && prefixMatch(g[1:], s[1:], true, steps)
}
