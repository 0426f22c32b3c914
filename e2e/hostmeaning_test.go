package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Host meaning (README: the threat model): what the mount makes is judged
// by what it means in BACKING, where the host sees it.

// TestDaemonFilesOutsideBacking: an audit log, a daemon log or a policy
// file inside BACKING is refused before anything is mounted (exit 2 with
// the reason), named directly, through a symlink from outside, or by -o;
// otherwise `rm m/audit.jsonl` would erase the trail. Nothing is created.
func TestDaemonFilesOutsideBacking(t *testing.T) {
	requireFUSE(t)
	root := t.TempDir()
	backing, mnt, outside := filepath.Join(root, "backing"), filepath.Join(root, "mnt"), filepath.Join(root, "etc")
	for _, d := range []string{backing, mnt, outside, filepath.Join(backing, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	policy := filepath.Join(backing, "realm.yaml")
	writeFile(t, policy, "version: 1\n")
	if err := os.Symlink(filepath.Join(backing, "logs"), filepath.Join(outside, "logs")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, role string
		args       []string
		made       string // a file the refused start must not create
	}{
		{"audit log in BACKING", "audit log", []string{"--audit-log", filepath.Join(backing, "audit.jsonl")}, filepath.Join(backing, "audit.jsonl")},
		{"audit log below BACKING, not yet made", "audit log", []string{"--audit-log", filepath.Join(backing, "logs", "new", "a.jsonl")}, filepath.Join(backing, "logs", "new")},
		{"audit log through a symlink", "audit log", []string{"--audit-log", filepath.Join(outside, "logs", "a.jsonl")}, filepath.Join(backing, "logs", "a.jsonl")},
		{"audit log by -o", "audit log", []string{"-o", "audit_log=" + filepath.Join(backing, "o.jsonl")}, filepath.Join(backing, "o.jsonl")},
		{"daemon log in BACKING", "log", []string{"--log", filepath.Join(backing, "realmfs.log")}, filepath.Join(backing, "realmfs.log")},
		{"policy file in BACKING", "policy file", []string{"--policy", policy}, ""},
	} {
		args := append([]string{"-f"}, tc.args...)
		args = append(args, backing, mnt)
		code, out := startRaw(t, mnt, nil, 15*time.Second, args...)
		if code != 2 || !strings.Contains(out, tc.role+" ") || !strings.Contains(out, "inside the backing directory") {
			t.Errorf("%s (%v): exit %d, output %q; want exit 2 naming the %s inside the backing directory", tc.name, args, code, out, tc.role)
		}
		if tc.made != "" {
			if _, err := os.Lstat(tc.made); !os.IsNotExist(err) {
				t.Errorf("%s: %s exists after the refused start (%v)", tc.name, tc.made, err)
			}
		}
		if m, _ := mountFSType(mnt); m != "" {
			t.Fatalf("%s: something is mounted at %s", tc.name, mnt)
		}
	}
	// Beside BACKING (a sibling whose name has BACKING's as a prefix) is
	// outside.
	sib := backing + "-logs"
	if err := os.Mkdir(sib, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out := startRaw(t, mnt, nil, 15*time.Second, "--audit-log", filepath.Join(sib, "a.jsonl"), backing, mnt)
	if code != 0 {
		t.Fatalf("audit log beside BACKING: exit %d, output %q; want a mount", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", mnt).Run() })
	if typ, _ := mountFSType(mnt); typ == "" {
		t.Errorf("audit log beside BACKING: realmfs exited 0 but nothing is mounted at %s", mnt)
	}
}
