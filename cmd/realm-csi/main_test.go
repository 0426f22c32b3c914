package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no node id", []string{"--realmfs", "/bin/true", "--base-dir", filepath.Join(dir, "b"), "--state-dir", filepath.Join(dir, "s")}, "node id is required"},
		{"nested dirs", []string{"--realmfs", "/bin/true", "--nodeid", "n", "--base-dir", dir, "--state-dir", filepath.Join(dir, "s")}, "must not contain one another"},
		{"arguments", []string{"--nodeid", "n", "extra"}, "unexpected arguments"},
		{"tcp endpoint", []string{"--realmfs", "/bin/true", "--nodeid", "n", "--base-dir", filepath.Join(dir, "b2"), "--state-dir", filepath.Join(dir, "s2"), "--endpoint", "tcp://127.0.0.1:9"}, "only unix://"},
		{"unknown flag", []string{"--node-id", "n"}, "flag provided but not defined"},
		{"daemon cgroup not in cgroup2", []string{"--realmfs", "/bin/true", "--nodeid", "n", "--base-dir", filepath.Join(dir, "b4"), "--state-dir", filepath.Join(dir, "s4"), "--daemon-cgroup", filepath.Join(dir, "cg")}, "not in a cgroup2 file system"},
		{"ephemeral size unreadable", []string{"--realmfs", "/bin/true", "--nodeid", "n", "--ephemeral-size", "10GB"}, "--ephemeral-size: size \"10GB\""},
		{"policy dir in the base dir", []string{"--realmfs", "/bin/true", "--nodeid", "n", "--base-dir", filepath.Join(dir, "b3"), "--state-dir", filepath.Join(dir, "s3"), "--policy-dir", filepath.Join(dir, "b3", "p")}, "inside the base dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestFindRealmfs(t *testing.T) {
	if got, err := findRealmfs("/opt/realmfs"); err != nil || got != "/opt/realmfs" {
		t.Fatalf("the flag's binary: %q, %v", got, err)
	}
	// Not beside the test binary: the one on PATH.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "realmfs"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if got, err := findRealmfs(""); err != nil || got != filepath.Join(bin, "realmfs") {
		t.Fatalf("realmfs on PATH: %q, %v", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := findRealmfs(""); err == nil || !strings.Contains(err.Error(), "--realmfs") {
		t.Fatalf("no realmfs anywhere: %v", err)
	}
}
