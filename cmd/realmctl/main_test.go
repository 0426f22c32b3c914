package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

func TestCommandLine(t *testing.T) {
	ws := t.TempDir()
	state := t.TempDir()
	// No podman service answers at this socket: every case must be decided
	// before realmctl would talk to one.
	base := []string{"--state-dir", state, "--podman-socket", "unix:///nonexistent.sock"}
	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantOut  string // substring of stdout
		wantCode string // JSON error code, when -o json
	}{
		{"help", []string{"--help"}, 0, "Exit status", ""},
		{"no command", nil, 2, "Usage", ""},
		{"unknown command", []string{"frob"}, 2, "", ""},
		{"bad output format", []string{"-o", "xml", "session", "list"}, 2, "", ""},
		{"subcommand help", []string{"session", "exec", "--help"}, 0, "--timeout", ""},
		{"list empty json", []string{"-o", "json", "session", "list"}, 0, "[]", ""},
		{"bad egress", []string{"-o", "json", "session", "create", "--workspace", ws, "--egress", "http://x"}, 2, "", "SCHEMA_INVALID"},
		{"workload without --", []string{"-o", "json", "session", "create", "--workspace", ws, "/bin/sleep"}, 2, "", "SCHEMA_INVALID"},
		{"exec without argv", []string{"-o", "json", "session", "exec", "0123456789ab"}, 2, "", "SCHEMA_INVALID"},
		{"exec unknown session", []string{"-o", "json", "session", "exec", "0123456789ab", "--", "true"}, 69, "", "REALM_NOT_ACTIVE"},
		{"destroy unknown session", []string{"-o", "json", "session", "destroy", "nope"}, 69, "", "REALM_NOT_ACTIVE"},
		{"reap without podman nor records", []string{"-o", "json", "reap"}, 0, `"recordsDeleted":0`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := tt.args
			if tt.name != "help" && tt.name != "no command" {
				args = append(append([]string{}, base...), args...)
			}
			got := run(context.Background(), args, &out, &errOut)
			if got != tt.wantExit {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tt.wantExit, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.wantOut)
			}
			if tt.wantCode != "" {
				var e struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Error.Code != tt.wantCode || e.Error.Message == "" {
					t.Errorf("stdout %q: want {\"error\":{\"code\":%q,...}} (%v)", out.String(), tt.wantCode, err)
				}
			}
		})
	}
	if entries, _ := os.ReadDir(state); len(entries) > 1 { // the reap case may leave only its lock
		t.Errorf("state dir written by failing commands: %v", entries)
	}
}

func TestFailExitStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{errcode.New(errcode.RealmStopping, "1 container survived"), 75},
		{errcode.New(errcode.ToolTimeout, "late"), 124},
		{errcode.New(errcode.SchemaInvalid, "bad"), 2},
		{errcode.New(errcode.RealmNotActive, "gone"), 69},
		{os.ErrPermission, 1},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if got := fail(&output{format: "json", w: &out, ew: &out}, tt.err); got != tt.want {
			t.Errorf("fail(%v) = %d, want %d", tt.err, got, tt.want)
		}
		if !strings.HasPrefix(out.String(), `{"error":{"code":"`) {
			t.Errorf("fail(%v) printed %q", tt.err, out.String())
		}
	}
}

// TestLimitMemory: realmctl sets its soft memory limit unless GOMEMLIMIT
// is in the environment.
func TestLimitMemory(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []int64
	}{{"", []int64{memoryLimit}}, {"1GiB", nil}} {
		var got []int64
		limitMemory(func(k string) string {
			if k == "GOMEMLIMIT" {
				return tc.env
			}
			return ""
		}, func(n int64) int64 { got = append(got, n); return 0 })
		if !slices.Equal(got, tc.want) {
			t.Errorf("GOMEMLIMIT=%q: set %v, want %v", tc.env, got, tc.want)
		}
	}
}
