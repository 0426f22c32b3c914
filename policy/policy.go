// Package policy holds what realm is told to enforce: the policy file and
// its validation, the credential glob set and the matcher the mount consults
// on every operation, egress allowlist validation, and the OpenShell sandbox
// policy document realmctl writes before it creates a sandbox.
//
// Every validation error is an *errcode.Error with code SCHEMA_INVALID whose
// message names the file (or list), the line and the field, so a person can
// fix the input without reading realm's source.
//
// # Policy file
//
// The policy file is YAML. Unknown keys, duplicate keys, wrong types, bad
// globs and bad values are errors; an absent optional section takes its
// default. Quote globs: a plain scalar starting with * is a YAML alias.
//
//	version: 1                 # required; must be 1
//	credentials:               # optional
//	  defaults: true           # include the built-in credential set (default true)
//	  deny: ["secrets/**"]     # globs added to the set (default none)
//	  allow: ["**/.env.example"]  # globs that override a denial (default none)
//	  hide: false              # true: denied entries also vanish from lookup
//	                           # and directory listings (default false)
//	protect:                   # optional
//	  defaults: true           # include the built-in protect set (default true)
//	  paths: [".tool/run.sh"]  # globs added to it (default none)
//	  allow: ["**/.npmrc"]     # globs exempted from it, as written (default none)
//	coordinated:               # optional
//	  defaults: true           # include the built-in set, SQLite's files (default true)
//	  paths: ["data/*.lmdb"]   # globs added to it (default none)
//	symlinks: inside-only      # optional; the only value, and the default
//	audit:                     # optional; no section means no audit file
//	  path: /var/log/realm/audit.jsonl  # required in the section; absolute
//
// A path is denied when it matches the built-in set (if defaults is true) or
// a deny glob, and matches no allow glob. Globs match the canonical
// workspace-relative path (slash-separated, no leading slash, symlinks inside
// the workspace resolved) with github.com/bmatcuk/doublestar/v4 syntax: * is
// any run of characters within one segment, ? is one character, [abc] and
// [a-z] are classes, {a,b} are alternatives, and ** is zero or more whole
// segments, so **/x matches x at the root too and x/** matches x itself.
// Matching is case-sensitive, as on Linux. A glob may not start with /, nor
// have empty, "." or ".." segments, since those could never match.
package policy

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
)

// SymlinksInsideOnly is the only symlink mode: a symlink whose target stays
// beneath the workspace root is served, any other is an escape.
const SymlinksInsideOnly = "inside-only"

// Policy is a parsed, validated policy file.
type Policy struct {
	// Version is the schema version; it must be 1.
	Version int
	// Credentials says which workspace paths are credentials.
	Credentials Credentials
	// Protect says which workspace paths a process on the mount may read
	// but not write.
	Protect Protect
	// Coordinated says which workspace paths programs share through
	// their own record locks, written in place (coordinated.go).
	Coordinated Coordinated
	// Symlinks is the symlink mode; only SymlinksInsideOnly exists.
	Symlinks string
	// Audit says where refusals are logged.
	Audit Audit
}

// Credentials is the credentials section of the policy file.
type Credentials struct {
	// Defaults includes DefaultCredentialGlobs in the denied set. YAML
	// key defaults; true unless the file says false.
	Defaults bool
	// Deny holds globs added to the denied set (YAML key deny).
	Deny []string
	// DenySources says where each Deny glob was written, for the audit
	// line of a refusal it makes: "policy:FILE:LINE", as Parse sets it.
	// nil (or shorter than Deny) for a Policy built in code, whose globs
	// are "policy".
	DenySources []string
	// Allow holds globs that override a denial, built-in or not (YAML key
	// allow): a path matching any of them is never denied.
	Allow []string
	// AllowSources says where each Allow glob was written (as
	// DenySources), for realmfs explain.
	AllowSources []string
	// Hide makes denied entries vanish: lookup answers ENOENT and
	// listings skip them. Without it a denied file can still be stat'ed,
	// which reveals size and mode but not content (YAML key hide).
	Hide bool
}

// Protect is the protect section of the policy file: host configuration
// that a program of the host executes or trusts, which a process on the
// mount must not plant or change (protect.go).
type Protect struct {
	// Defaults includes DefaultProtectGlobs and DefaultProtectExceptions
	// (YAML key defaults; true unless the file says false).
	Defaults bool
	// Paths holds globs added to the protected set (YAML key paths).
	Paths []string
	// Allow holds globs exempted from it (YAML key allow), matched as
	// written.
	Allow []string
	// PathSources, AllowSources: where each glob was written (as
	// Credentials.DenySources), for realmfs explain.
	PathSources, AllowSources []string
}

// Audit is the audit section of the policy file.
type Audit struct {
	// Path is the absolute path of the JSON-lines audit log (YAML key
	// path); empty when the policy has no audit section.
	Path string
}

// Default returns the built-in policy used when realmfs is given no policy
// file: version 1, the built-in credential set, nothing added or allowed,
// denied entries visible to stat, inside-only symlinks, no audit file.
func Default() *Policy {
	return &Policy{
		Version:     1,
		Credentials: Credentials{Defaults: true},
		Protect:     Protect{Defaults: true},
		Coordinated: Coordinated{Defaults: true},
		Symlinks:    SymlinksInsideOnly,
	}
}

// maxPolicySize bounds the file: a policy is a few dozen lines, and a bound
// keeps a wrong path (a log, a device) from being read whole.
const maxPolicySize = 1 << 20

// Load reads and parses the policy file at path. A file that cannot be read
// is SCHEMA_INVALID too: the caller asked for that policy and nothing may
// start without it.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errcode.Wrap(errcode.SchemaInvalid, err, "policy %s: cannot read", path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicySize+1))
	if err != nil {
		return nil, errcode.Wrap(errcode.SchemaInvalid, err, "policy %s: cannot read", path)
	}
	return Parse(path, data)
}

// Validate checks a Policy that did not come from Parse (one built in code).
// Errors name the field but no line.
func (p *Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return errcode.New(errcode.SchemaInvalid, "policy: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if p.Version != 1 {
		return bad("version", "unsupported version %d (want 1)", p.Version)
	}
	for _, list := range []struct {
		name  string
		globs []string
		check func(string) error
	}{{"credentials.deny", p.Credentials.Deny, checkGlob}, {"credentials.allow", p.Credentials.Allow, checkGlob},
		{"protect.paths", p.Protect.Paths, checkProtectGlob}, {"protect.allow", p.Protect.Allow, checkGlob},
		{"coordinated.paths", p.Coordinated.Paths, checkGlob}} {
		for i, g := range list.globs {
			if err := list.check(g); err != nil {
				return errcode.Wrap(errcode.SchemaInvalid, err, "policy: %s[%d]", list.name, i)
			}
		}
	}
	if p.Symlinks != SymlinksInsideOnly {
		return bad("symlinks", "unknown mode %q (want %q)", p.Symlinks, SymlinksInsideOnly)
	}
	if msg := checkAuditPath(p.Audit.Path, true); msg != "" {
		return bad("audit.path", "%s", msg)
	}
	return nil
}

// checkAuditPath returns why p cannot be the audit log path, or "".
func checkAuditPath(p string, emptyOK bool) string {
	switch {
	case p == "" && emptyOK:
		return ""
	case p == "":
		return "empty path"
	case !path.IsAbs(p):
		return fmt.Sprintf("%q is not an absolute path", p)
	case strings.IndexByte(p, 0) >= 0:
		return "path contains a NUL byte"
	case path.Clean(p) != p:
		return fmt.Sprintf("%q is not a clean path (want %q)", p, path.Clean(p))
	case p == "/":
		return fmt.Sprintf("%q names a directory, not a file", p)
	}
	for _, fs := range kernelTrees {
		if p == fs || strings.HasPrefix(p, fs+"/") {
			return fmt.Sprintf("%q is under %s, whose files are the kernel's, not a log", p, fs)
		}
	}
	return ""
}

// kernelTrees are where a path names a kernel object (a process's memory,
// a device, a sysfs knob), which appending audit lines to would corrupt.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// Render returns the effective policy as YAML, for realmfs --show-policy:
// every field present, and with defaults on, the built-in globs listed first
// under deny, each with its source as a comment. The output parses back to a
// policy that denies exactly the same paths, and rendering that again gives
// the same bytes.
func (p *Policy) Render() []byte {
	if p == nil {
		p = Default()
	}
	str, boolean, mapping := yamlStr, yamlBool, yamlMap
	deny := globList(p.Credentials.Defaults, DefaultCredentialGlobs, p.Credentials.Deny)
	allow := globList(p.Credentials.Defaults, DefaultPublicGlobs, p.Credentials.Allow)
	protectDefaults := defaultsKey(p.Protect.Defaults, "protect: paths a process on the mount may read but not write. ",
		"defaults: true applies the built-in set (listed first under paths, its exceptions first under allow).",
		"defaults: false: the built-in protect set is not applied.")
	coordDefaults := defaultsKey(p.Coordinated.Defaults, "coordinated: paths programs share through their own record locks (SQLite), written in place for every owner. ",
		"defaults: true applies the built-in set (listed first under paths).",
		"defaults: false: the built-in set is not applied.")
	defaults := defaultsKey(p.Credentials.Defaults, "",
		"defaults: true applies the built-in set (listed first under deny, its public exceptions first under allow) whether or not it is listed.",
		"defaults: false: the built-in credential set is not applied.")
	root := mapping(
		str("version"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(p.Version)},
		str("credentials"), mapping(
			defaults, boolean(p.Credentials.Defaults),
			str("deny"), deny,
			str("allow"), allow,
			str("hide"), boolean(p.Credentials.Hide),
		),
		str("protect"), mapping(
			protectDefaults, boolean(p.Protect.Defaults),
			str("paths"), globList(p.Protect.Defaults, DefaultProtectGlobs, p.Protect.Paths),
			str("allow"), globList(p.Protect.Defaults, DefaultProtectExceptions, p.Protect.Allow),
		),
		str("coordinated"), mapping(
			coordDefaults, boolean(p.Coordinated.Defaults),
			str("paths"), globList(p.Coordinated.Defaults, DefaultCoordinatedGlobs, p.Coordinated.Paths),
		),
		str("symlinks"), str(p.Symlinks),
	)
	if p.Audit.Path != "" {
		root.Content = append(root.Content, str("audit"), mapping(str("path"), str(p.Audit.Path)))
	} else {
		root.FootComment = "audit: no audit file configured"
	}
	doc := &yaml.Node{
		Kind:        yaml.DocumentNode,
		HeadComment: "Effective realm policy, defaults expanded.",
		Content:     []*yaml.Node{root},
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		// Only a node tree we built ourselves reaches here; say so
		// rather than print half a policy.
		return fmt.Appendf(nil, "# cannot render policy: %v\n", err)
	}
	enc.Close()
	return buf.Bytes()
}

// The YAML nodes Render builds.

func yamlStr(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

func yamlGlob(v string) *yaml.Node {
	n := yamlStr(v)
	n.Style = yaml.SingleQuotedStyle
	return n
}

func yamlBool(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}
}

func yamlMap(kv ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: kv}
}

// globList lists the built-in globs (when the defaults apply), each with
// its source, then the policy's own that are not among them.
func globList(defaults bool, builtins []Glob, own []string) *yaml.Node {
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	builtin := make(map[string]bool)
	if defaults {
		for _, g := range builtins {
			n := yamlGlob(g.Pattern)
			n.LineComment = "built-in: " + g.Source
			list.Content = append(list.Content, n)
			builtin[g.Pattern] = true
		}
	}
	for _, g := range own {
		if !builtin[g] {
			list.Content = append(list.Content, yamlGlob(g))
		}
	}
	if len(list.Content) == 0 {
		list.Style = yaml.FlowStyle
	}
	return list
}

// defaultsKey is a section's defaults key, with a comment that says what
// its value does.
func defaultsKey(on bool, what, onText, offText string) *yaml.Node {
	n := yamlStr("defaults")
	n.HeadComment = what + offText
	if on {
		n.HeadComment = what + onText
	}
	return n
}
