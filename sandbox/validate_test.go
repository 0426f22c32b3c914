package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	badPolicy := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badPolicy, []byte("no: [such, field\n"), 0o600)
	ok := CreateRequest{Workspace: dir}
	tests := []struct {
		name    string
		mod     func(r *CreateRequest)
		wantErr string // substring; "" means valid
	}{
		{"defaults", func(r *CreateRequest) {}, ""},
		{"egress ok", func(r *CreateRequest) {
			r.Runtime, r.Egress = "openshell", []string{"api.example.com", "10.0.0.1:8443"}
		}, ""},
		{"egress on podman", func(r *CreateRequest) { r.Runtime, r.Egress = "podman", []string{"api.example.com"} }, "cannot enforce"},
		{"user", func(r *CreateRequest) { r.User = "1000" }, ""},
		{"no workspace", func(r *CreateRequest) { r.Workspace = "" }, "--workspace"},
		{"missing workspace", func(r *CreateRequest) { r.Workspace = filepath.Join(dir, "nope") }, "does not exist"},
		{"workspace is a file", func(r *CreateRequest) { r.Workspace = file }, "not a directory"},
		{"relative workload", func(r *CreateRequest) { r.Workload = []string{"sleep", "1"} }, "absolute"},
		{"egress scheme", func(r *CreateRequest) { r.Egress = []string{"https://example.com"} }, "egress[0]"},
		{"egress duplicate", func(r *CreateRequest) { r.Egress = []string{"a.example.com", "a.example.com:443"} }, "egress[1]"},
		{"egress bad port", func(r *CreateRequest) { r.Egress = []string{"example.com:70000"} }, "egress[0]"},
		{"missing policy", func(r *CreateRequest) { r.Policy = filepath.Join(dir, "none.yaml") }, "policy"},
		{"invalid policy", func(r *CreateRequest) { r.Policy = badPolicy }, "bad.yaml"},
		{"bad user", func(r *CreateRequest) { r.User = "agent" }, "--user"},
		{"bad name", func(r *CreateRequest) { r.Name = "-x" }, "--name"},
		{"unknown runtime", func(r *CreateRequest) { r.Runtime = "docker" }, "--runtime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.mod(&r)
			p, err := Validate(r)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if !filepath.IsAbs(p.Workspace()) || p.user == "" {
					t.Errorf("plan not filled in: %+v", p)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want error containing %q", tt.wantErr)
			}
			if c, _ := errcode.Of(err); c != errcode.SchemaInvalid {
				t.Errorf("code %q, want SCHEMA_INVALID (%v)", c, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateUserDefaultsToOwner(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		os.Chown(dir, 1234, 5678)
		p, err := Validate(CreateRequest{Workspace: dir})
		if err != nil {
			t.Fatal(err)
		}
		if p.user != "1234:5678" {
			t.Errorf("user = %q, want 1234:5678", p.user)
		}
	}
	p, err := Validate(CreateRequest{Workspace: dir, User: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if p.user != "42:42" {
		t.Errorf("user = %q, want 42:42", p.user)
	}
}
