package policy

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
)

// OpenShell sandbox policy document. The key names follow OpenShell's policy
// schema reference (docs/how-it-works/policies/schema.mdx in NVIDIA/OpenShell):
// OpenShell rejects unknown fields, so only documented keys appear here.
const (
	// OpenShellEgressRule is the key (and display name) of the one
	// network rule realm writes.
	OpenShellEgressRule = "realm-egress"
	// OpenShellUser is the identity the workload runs as: OpenShell's
	// unprivileged sandbox account.
	OpenShellUser = "sandbox"
)

// OpenShellReadOnly are the paths the workload may read besides the
// workspace: what a dynamically linked program and a shell need (binaries,
// libraries, /etc for resolv.conf, CA certificates and passwd, /proc, a
// random source), and /app, where OpenShell images keep their own files.
// It mirrors OpenShell's own baseline (which it adds anyway once a policy has
// a network rule) plus /bin, /sbin and /lib64 for images that do not merge
// /usr; a listed path that is missing in the image is skipped by OpenShell.
// /var/log is left out: nothing in a session needs to read the image's logs.
var OpenShellReadOnly = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/app", "/proc", "/dev/urandom"}

// OpenShellReadWrite are the paths the workload may write besides the
// workspace: /tmp and /dev/null, as in OpenShell's baseline, because shells
// and compilers fail without them. Neither is the workspace, so neither is
// guarded by realm.
var OpenShellReadWrite = []string{"/tmp", "/dev/null"}

type openShellDoc struct {
	Version          int                      `yaml:"version"`
	FilesystemPolicy openShellFS              `yaml:"filesystem_policy"`
	Landlock         openShellLandlock        `yaml:"landlock"`
	Process          openShellProcess         `yaml:"process"`
	NetworkPolicies  map[string]openShellRule `yaml:"network_policies,omitempty"`
}

type openShellFS struct {
	IncludeWorkdir bool     `yaml:"include_workdir"`
	ReadOnly       []string `yaml:"read_only"`
	ReadWrite      []string `yaml:"read_write"`
}

type openShellLandlock struct {
	Compatibility string `yaml:"compatibility"`
}

type openShellProcess struct {
	RunAsUser  string `yaml:"run_as_user"`
	RunAsGroup string `yaml:"run_as_group"`
}

type openShellRule struct {
	Name      string              `yaml:"name"`
	Endpoints []openShellEndpoint `yaml:"endpoints"`
	Binaries  []openShellBinary   `yaml:"binaries"`
}

type openShellEndpoint struct {
	Host        quoted `yaml:"host"`
	Port        int    `yaml:"port"`
	Enforcement string `yaml:"enforcement"`
}

// quoted is a string always written in double quotes, so that no YAML reader
// takes an IPv6 address such as 1:2::3 for anything but a string.
type quoted string

func (q quoted) MarshalYAML() (any, error) {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: string(q)}, nil
}

type openShellBinary struct {
	Path string `yaml:"path"`
}

// OpenShellDocument renders the OpenShell sandbox policy for one session:
//
//   - version: 1
//   - filesystem_policy: include_workdir false (the sandbox's own working
//     directory is not the guarded workspace), read_write the workspace
//     target plus OpenShellReadWrite, read_only OpenShellReadOnly;
//   - landlock: {compatibility: hard_requirement}, so a kernel that cannot
//     enforce the filesystem rules stops the sandbox rather than runs it open;
//   - process: {run_as_user: sandbox, run_as_group: sandbox};
//   - network_policies: one rule, realm-egress, whose endpoints are egress
//     (host, port, enforcement: enforce) and whose binaries are exactly
//     the workload binary. With no egress the section is left out: no rule
//     means OpenShell denies all outbound traffic.
//
// workspaceTarget is where the guarded mount appears inside the sandbox and
// workloadBinary is the workload's argv[0]; both must be absolute and clean,
// and the workspace may not be "/". Egress endpoints must be as ParseEgress
// returns them. Anything else is SCHEMA_INVALID.
func OpenShellDocument(workspaceTarget string, egress []Endpoint, workloadBinary string) ([]byte, error) {
	if msg := checkSandboxPath(workspaceTarget); msg != "" {
		return nil, errcode.New(errcode.SchemaInvalid, "workspace target %q: %s", workspaceTarget, msg)
	}
	if workspaceTarget == "/" {
		return nil, errcode.New(errcode.SchemaInvalid, "workspace target %q: the root cannot be read-write", workspaceTarget)
	}
	if msg := checkSandboxPath(workloadBinary); msg != "" {
		return nil, errcode.New(errcode.SchemaInvalid, "workload binary %q: %s", workloadBinary, msg)
	}
	doc := openShellDoc{
		Version: 1,
		FilesystemPolicy: openShellFS{
			// The workspace is listed once, read-write, even if it
			// is also a baseline path.
			ReadOnly:  without(OpenShellReadOnly, workspaceTarget),
			ReadWrite: append([]string{workspaceTarget}, without(OpenShellReadWrite, workspaceTarget)...),
		},
		Landlock: openShellLandlock{Compatibility: "hard_requirement"},
		Process:  openShellProcess{RunAsUser: OpenShellUser, RunAsGroup: OpenShellUser},
	}
	if len(egress) > 0 {
		rule := openShellRule{
			Name:     OpenShellEgressRule,
			Binaries: []openShellBinary{{Path: workloadBinary}},
		}
		seen := make(map[Endpoint]bool, len(egress))
		for i, e := range egress {
			if msg := e.check(); msg != "" {
				return nil, errcode.New(errcode.SchemaInvalid, "egress[%d] %q: %s", i, e.String(), msg)
			}
			if seen[e] {
				return nil, errcode.New(errcode.SchemaInvalid, "egress[%d] %q: duplicate", i, e.String())
			}
			seen[e] = true
			rule.Endpoints = append(rule.Endpoints, openShellEndpoint{Host: quoted(e.Host), Port: e.Port, Enforcement: "enforce"})
		}
		doc.NetworkPolicies = map[string]openShellRule{OpenShellEgressRule: rule}
	}
	var buf bytes.Buffer
	buf.WriteString("# OpenShell sandbox policy written by realm for one session.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("policy: render OpenShell document: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("policy: render OpenShell document: %w", err)
	}
	return buf.Bytes(), nil
}

// without returns a copy of list without s.
func without(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		if e != s {
			out = append(out, e)
		}
	}
	return out
}

// checkSandboxPath returns why p cannot be a path in an OpenShell policy, or
// "". OpenShell wants absolute paths without "..", at most 4096 bytes.
func checkSandboxPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case !path.IsAbs(p):
		return "must be an absolute path"
	case len(p) > 4096:
		return "longer than 4096 bytes"
	case strings.ContainsAny(p, "\x00\n\r"):
		return "contains a NUL or newline"
	case path.Clean(p) != p:
		return fmt.Sprintf("not a clean path (want %q)", path.Clean(p))
	}
	return ""
}
