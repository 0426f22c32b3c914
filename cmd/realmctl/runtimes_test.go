package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/realm-dev/realm/sandbox"
)

// buildFakeOpenShell builds internal/fakeopenshell as dir/openshell.
func buildFakeOpenShell(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	bin := filepath.Join(dir, "openshell")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/realm-dev/realm/internal/fakeopenshell").CombinedOutput(); err != nil {
		t.Fatalf("build fake openshell: %v\n%s", err, out)
	}
	return bin
}

// TestReapAsksOnlyPresentOrNamedRuntimes: a reap asks a runtime only if it
// is there or a record names it. No Podman service answers in any case
// here; the OpenShell CLI is either absent (PATH has none) or the fake.
func TestReapAsksOnlyPresentOrNamedRuntimes(t *testing.T) {
	fakeDir := t.TempDir()
	fake := buildFakeOpenShell(t, fakeDir)
	tests := []struct {
		name      string
		openshell bool     // the fake CLI is given with --openshell
		records   []string // runtime of each record; "corrupt" for an unreadable one
		wantExit  int
		wantCode  string
		wantKept  int // records left
	}{
		{"no runtime, no records", false, nil, 0, "", 0},
		{"no runtime, a podman record", false, []string{"podman"}, 69, "REALM_NOT_ACTIVE", 1},
		{"no runtime, an openshell record", false, []string{"openshell"}, 69, "REALM_NOT_ACTIVE", 1},
		{"no runtime, a corrupt record", false, []string{"corrupt"}, 0, "", 0},
		{"openshell only, an openshell record", true, []string{"openshell"}, 0, "", 0},
		{"openshell only, no records", true, nil, 0, "", 0},
		{"openshell only, a podman record", true, []string{"openshell", "podman"}, 69, "REALM_NOT_ACTIVE", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			t.Setenv("PATH", t.TempDir()) // no openshell on PATH
			t.Setenv("FAKE_OPENSHELL_STATE", filepath.Join(t.TempDir(), "fake"))
			t.Setenv("FAKE_OPENSHELL_LOG", "")
			store := sandbox.NewStore(state)
			for i, rt := range tt.records {
				id := "00000000000" + string(rune('a'+i))
				if rt == "corrupt" {
					os.MkdirAll(store.Dir, 0o700)
					if err := os.WriteFile(filepath.Join(store.Dir, id+".json"), []byte("{not json"), 0o600); err != nil {
						t.Fatal(err)
					}
					continue
				}
				cid := sandbox.ContainerName(id)
				if err := store.Save(&sandbox.Record{ID: id, State: sandbox.StateActive, Runtime: rt,
					ContainerID: &cid, Mount: filepath.Join(state, "mounts", "none"), CreatedAt: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock", "reap", "-o", "json"}
			if tt.openshell {
				args = append(args, "--openshell", fake)
			}
			var out, errOut bytes.Buffer
			if got := run(context.Background(), args, &out, &errOut); got != tt.wantExit {
				t.Errorf("exit %d, want %d\nstdout: %s", got, tt.wantExit, out.String())
			}
			var e struct{ Error struct{ Code string } }
			if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Error.Code != tt.wantCode {
				t.Errorf("output %q: want error code %q", out.String(), tt.wantCode)
			}
			left, err := store.List()
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != tt.wantKept {
				t.Errorf("records left %v, want %d", left, tt.wantKept)
			}
		})
	}
}

// TestListAndDestroyAskOnlyTheRecordsRuntime: session list reads records
// only; destroy asks the one runtime its record names.
func TestListAndDestroyAskOnlyTheRecordsRuntime(t *testing.T) {
	fake := buildFakeOpenShell(t, t.TempDir())
	state := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	t.Setenv("FAKE_OPENSHELL_STATE", filepath.Join(t.TempDir(), "fake"))
	t.Setenv("FAKE_OPENSHELL_LOG", "")
	store := sandbox.NewStore(state)
	id := "0123456789ab"
	cid := sandbox.ContainerName(id)
	if err := store.Save(&sandbox.Record{ID: id, State: sandbox.StateActive, Runtime: "openshell",
		ContainerID: &cid, Mount: filepath.Join(state, "mounts", "none"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock", "-o", "json"}
	var out bytes.Buffer
	if code := run(context.Background(), append(base, "session", "list"), &out, &out); code != 0 {
		t.Fatalf("session list exited %d: %s", code, out.String())
	}
	var recs []sandbox.Record
	if err := json.Unmarshal(out.Bytes(), &recs); err != nil || len(recs) != 1 || recs[0].ID != id {
		t.Fatalf("session list printed %q", out.String())
	}
	out.Reset()
	if code := run(context.Background(), append(base, "session", "destroy", id, "--openshell", fake), &out, &out); code != 0 {
		t.Fatalf("session destroy exited %d: %s", code, out.String())
	}
	if left, _ := store.List(); !slices.Equal(left, []string(nil)) {
		t.Errorf("records left after destroy: %v", left)
	}
}
