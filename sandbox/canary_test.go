package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

// dirRuntime runs execs on this host with the sandbox path /workspace
// standing for dir, as a sandbox with dir bound at /workspace would.
type dirRuntime struct {
	fakeRuntime
	dir     string
	execErr error
	hint    string
}

func (d *dirRuntime) Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error) {
	if d.execErr != nil {
		return ExecResult{}, d.execErr
	}
	argv := make([]string, len(r.Argv))
	for i, a := range r.Argv {
		argv[i] = strings.ReplaceAll(a, "/workspace", d.dir)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return ExecResult{}, err
	}
	code := 0
	if ee != nil {
		code = ee.ExitCode()
	}
	return ExecResult{ExitCode: code, Stdout: string(out)}, nil
}

func (d *dirRuntime) WorkspaceHint() string { return d.hint }

func TestProveWorkspace(t *testing.T) {
	tests := []struct {
		name     string
		seen     string // what the sandbox's /workspace is: mount, backing, empty
		execErr  error
		wantErr  string // substring of the message; "" for success
		wantHint bool
	}{
		{"the guarded mount", "mount", nil, "", false},
		{"the bare workspace directory", "backing", nil, "without realm's guard", true},
		{"an empty directory", "empty", nil, "does not show the guarded mount", true},
		{"exec fails", "mount", errcode.New(errcode.RealmNotActive, "gone"), "could not read the workspace canary", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// mount and backing are separate directories here: what is
			// written "through the mount" is seen only in mount.
			dirs := map[string]string{"mount": t.TempDir(), "backing": t.TempDir(), "empty": t.TempDir()}
			rt := &dirRuntime{dir: dirs[tt.seen], execErr: tt.execErr, hint: "CONFIGURE-THIS"}
			err := proveWorkspace(context.Background(), rt, "cid", dirs["mount"], dirs["backing"])
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("proveWorkspace: %v", err)
				}
			} else {
				if c, _ := errcode.Of(err); c != errcode.RealmNotActive || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("proveWorkspace: %v; want REALM_NOT_ACTIVE with %q", err, tt.wantErr)
				}
				if got := strings.Contains(err.Error(), "CONFIGURE-THIS"); got != tt.wantHint {
					t.Errorf("hint in %q: %v, want %v", err, got, tt.wantHint)
				}
			}
			for name, d := range dirs {
				left, _ := filepath.Glob(filepath.Join(d, ".realm-*"))
				if len(left) > 0 {
					t.Errorf("%s dir keeps %v", name, left)
				}
				if ents, _ := os.ReadDir(d); len(ents) > 0 {
					t.Errorf("%s dir not empty: %v", name, ents)
				}
			}
		})
	}
}
