package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMadeStorePath: the made set's file is in the state directory, one
// per BACKING; none, and a default directory inside BACKING, remember
// nothing.
func TestMadeStorePath(t *testing.T) {
	backing, state := t.TempDir(), t.TempDir()
	home := filepath.Join(backing, "home")
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".local", "state"))
	t.Setenv("HOME", home)
	inside := os.Geteuid() != 0 // the default ($XDG_STATE_HOME) lies inside BACKING
	for _, tc := range []struct {
		name, dir, backing string
		want               string // "" none, "in DIR" a file in DIR
	}{
		{"none", stateNone, backing, ""},
		{"given", state, backing, "in " + state},
		{"default for BACKING /", "", "/", ""},
	} {
		got := madeStorePath(tc.dir, tc.backing)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: %q, want none", tc.name, got)
		case strings.HasPrefix(tc.want, "in "):
			if dir := strings.TrimPrefix(tc.want, "in "); filepath.Dir(got) != dir || !strings.HasPrefix(filepath.Base(got), "made-") {
				t.Errorf("%s: %q, want a made-*.json in %s", tc.name, got, dir)
			}
		}
	}
	if got := madeStorePath("", backing); inside && got != "" {
		t.Errorf("default state directory inside BACKING: %q, want none", got)
	}
	if a, b := madeStorePath(state, backing), madeStorePath(state, state); a == b {
		t.Errorf("two BACKINGs share the store %q", a)
	}
}
