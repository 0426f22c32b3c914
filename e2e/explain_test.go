package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplain: `realmfs explain` says, for a table of paths, what the
// built-in policy and a custom one do, and by which rule of which source
// (file and line for a policy file's); a bad policy file is refused naming
// its field and line.
func TestExplain(t *testing.T) {
	dir := t.TempDir()
	custom := filepath.Join(dir, "policy.yaml")
	writeFile(t, custom, "version: 1\ncredentials:\n  deny: [\"secrets/**\"]\n  allow: [\"secrets/public/**\"]\nprotect:\n  paths: [\"tools/*.sh\"]\n")
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "version: 1\ncredentials:\n  deny: 7\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{".env", "src/main.go", ".git/hooks/pre-commit", "app.db"}, []string{
			".env: credential\n  open, read, write, rename, link and metadata changes refused (EACCES, CREDENTIAL_PATH_DENIED) by deny glob **/.env (built-in:",
			"src/main.go: allowed\n",
			".git/hooks/pre-commit: protected\n  writes refused, reads allowed (EACCES, PROTECTED_PATH_DENIED) by protect glob **/.git/hooks/** (built-in:",
			"app.db: coordinated\n",
		}},
		{[]string{"--policy", custom, "secrets/a.txt", "secrets/public/b.txt", "tools/run.sh"}, []string{
			"secrets/a.txt: credential\n  open, read, write, rename, link and metadata changes refused (EACCES, CREDENTIAL_PATH_DENIED) by deny glob secrets/** (policy:" + custom + ":3)",
			"secrets/public/b.txt: allowed\n  would be a credential by deny glob secrets/** (policy:" + custom + ":3)\n  but is allowed by secrets/public/** (policy:" + custom + ":4)",
			"tools/run.sh: protected\n  writes refused, reads allowed (EACCES, PROTECTED_PATH_DENIED) by protect glob tools/*.sh (policy:" + custom + ":6)",
		}},
	} {
		out, err := exec.Command(realmfsBin, append([]string{"explain"}, tc.args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("realmfs explain %s: %v\n%s", strings.Join(tc.args, " "), err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("realmfs explain %s:\n%s\nlacks %q", strings.Join(tc.args, " "), out, w)
			}
		}
	}
	out, err := exec.Command(realmfsBin, "explain", "--policy", bad, ".env").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "credentials.deny") || !strings.Contains(string(out), ":3") {
		t.Errorf("realmfs explain with a bad policy: %v\n%s\nwant exit 2 naming credentials.deny at line 3", err, out)
	}
}
