package policy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
)

// openShellParsed is the document as OpenShell would read it; KnownFields
// makes the test fail on any key this struct does not name.
type openShellParsed struct {
	Version          int `yaml:"version"`
	FilesystemPolicy struct {
		IncludeWorkdir *bool    `yaml:"include_workdir"`
		ReadOnly       []string `yaml:"read_only"`
		ReadWrite      []string `yaml:"read_write"`
	} `yaml:"filesystem_policy"`
	Landlock struct {
		Compatibility string `yaml:"compatibility"`
	} `yaml:"landlock"`
	Process struct {
		RunAsUser  string `yaml:"run_as_user"`
		RunAsGroup string `yaml:"run_as_group"`
	} `yaml:"process"`
	NetworkPolicies map[string]struct {
		Name      string `yaml:"name"`
		Endpoints []struct {
			Host        string `yaml:"host"`
			Port        int    `yaml:"port"`
			Enforcement string `yaml:"enforcement"`
		} `yaml:"endpoints"`
		Binaries []struct {
			Path string `yaml:"path"`
		} `yaml:"binaries"`
	} `yaml:"network_policies"`
}

func parseOpenShell(t *testing.T, doc []byte) openShellParsed {
	t.Helper()
	var got openShellParsed
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("document does not parse: %v\n%s", err, doc)
	}
	return got
}

func TestOpenShellDocument(t *testing.T) {
	egress, err := ParseEgress([]string{"api.example.com", "*.pypi.example.org:8443", "[2001:db8::1]:22", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := OpenShellDocument("/workspace", egress, "/usr/local/bin/agent")
	if err != nil {
		t.Fatal(err)
	}
	got := parseOpenShell(t, doc)

	if got.Version != 1 {
		t.Errorf("version = %d", got.Version)
	}
	fs := got.FilesystemPolicy
	if fs.IncludeWorkdir == nil || *fs.IncludeWorkdir {
		t.Errorf("include_workdir = %v, want an explicit false", fs.IncludeWorkdir)
	}
	if want := []string{"/workspace", "/tmp", "/dev/null"}; !reflect.DeepEqual(fs.ReadWrite, want) {
		t.Errorf("read_write = %q, want %q", fs.ReadWrite, want)
	}
	if !reflect.DeepEqual(fs.ReadOnly, OpenShellReadOnly) {
		t.Errorf("read_only = %q, want %q", fs.ReadOnly, OpenShellReadOnly)
	}
	if got.Landlock.Compatibility != "hard_requirement" {
		t.Errorf("landlock.compatibility = %q", got.Landlock.Compatibility)
	}
	if got.Process.RunAsUser != "sandbox" || got.Process.RunAsGroup != "sandbox" {
		t.Errorf("process = %+v", got.Process)
	}
	if len(got.NetworkPolicies) != 1 {
		t.Fatalf("network_policies = %+v, want one rule", got.NetworkPolicies)
	}
	rule, ok := got.NetworkPolicies["realm-egress"]
	if !ok {
		t.Fatalf("no realm-egress rule in %+v", got.NetworkPolicies)
	}
	if rule.Name != "realm-egress" {
		t.Errorf("rule name = %q", rule.Name)
	}
	if len(rule.Binaries) != 1 || rule.Binaries[0].Path != "/usr/local/bin/agent" {
		t.Errorf("binaries = %+v, want exactly the workload", rule.Binaries)
	}
	if len(rule.Endpoints) != len(egress) {
		t.Fatalf("endpoints = %+v, want %v", rule.Endpoints, egress)
	}
	for i, e := range rule.Endpoints {
		if e.Host != egress[i].Host || e.Port != egress[i].Port || e.Enforcement != "enforce" {
			t.Errorf("endpoints[%d] = %+v, want %v enforced", i, e, egress[i])
		}
	}
}

func TestOpenShellDocumentNoEgress(t *testing.T) {
	doc, err := OpenShellDocument("/app", nil, "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	got := parseOpenShell(t, doc)
	if got.NetworkPolicies != nil {
		t.Errorf("network_policies = %+v, want none (all egress denied)", got.NetworkPolicies)
	}
	if strings.Contains(string(doc), "network_policies") {
		t.Errorf("document names network_policies:\n%s", doc)
	}
	// The workspace is read-write only, even where it is a baseline path.
	for _, p := range got.FilesystemPolicy.ReadOnly {
		if p == "/app" {
			t.Errorf("read_only lists the workspace /app: %q", got.FilesystemPolicy.ReadOnly)
		}
	}
	if got.FilesystemPolicy.ReadWrite[0] != "/app" {
		t.Errorf("read_write = %q", got.FilesystemPolicy.ReadWrite)
	}
}

func TestOpenShellDocumentErrors(t *testing.T) {
	good := []Endpoint{{"example.com", 443}}
	tests := []struct {
		name      string
		workspace string
		egress    []Endpoint
		binary    string
		want      string
	}{
		{"relative binary", "/workspace", good, "agent", `workload binary "agent": must be an absolute path`},
		{"empty binary", "/workspace", good, "", `workload binary "": empty path`},
		{"unclean binary", "/workspace", good, "/usr/bin/../bin/agent", "not a clean path"},
		{"newline binary", "/workspace", good, "/bin/a\nb", "NUL or newline"},
		{"relative workspace", "workspace", good, "/bin/agent", `workspace target "workspace": must be an absolute path`},
		{"root workspace", "/", good, "/bin/agent", "the root cannot be read-write"},
		{"bad port", "/workspace", []Endpoint{{"example.com", 0}}, "/bin/agent", `egress[0] "example.com:0": port 0 is out of range`},
		{"bad host", "/workspace", []Endpoint{{"http://x", 443}}, "/bin/agent", "egress[0]"},
		{"upper-case host", "/workspace", []Endpoint{{"Example.com", 443}}, "/bin/agent", "not in lower case"},
		{"duplicate", "/workspace", []Endpoint{{"a.b", 1}, {"a.b", 1}}, "/bin/agent", `egress[1] "a.b:1": duplicate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := OpenShellDocument(tt.workspace, tt.egress, tt.binary)
			if err == nil {
				t.Fatalf("OpenShellDocument = %s, want error", doc)
			}
			if c, _ := errcode.Of(err); c != errcode.SchemaInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want SCHEMA_INVALID containing %q", err, tt.want)
			}
		})
	}
}
