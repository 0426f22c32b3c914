package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealmctlSessionUndo: what a session's sandbox changes in the
// workspace is shown by session diff and put back by session undo; a file
// a person on the host changed after the session stays as the person left
// it, listed as a conflict (exit 1).
func TestRealmctlSessionUndo(t *testing.T) {
	c := newCtl(t)
	ws := workspace(t)
	for name, body := range map[string]string{"edit.txt": "alpha\nbeta\n", "gone.txt": "farewell\n", "mine.txt": "person\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(ws, name), 1000, 1000)
	}
	id := c.create(ws, "--name", "undoer")
	r, code := c.exec(id, "", "sh", "-c", "cd /workspace && sed -i s/beta/BETA/ edit.txt && rm gone.txt && echo fresh > made.txt && echo agent >> mine.txt")
	if code != 0 || r.ExitCode != 0 {
		t.Fatalf("exec = %+v, exit %d", r, code)
	}
	// The person's change, through the mount, after the session's.
	mnt := c.record(id)["mount"].(string)
	if err := os.WriteFile(filepath.Join(mnt, "mine.txt"), []byte("person again\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	diff := c.ok("session", "diff", "undoer")
	for _, want := range []string{"modified edit.txt\n", "-beta\n+BETA\n", "deleted file gone.txt\n", "created file made.txt\n"} {
		if !strings.Contains(diff, want) {
			t.Errorf("session diff:\n%s\nlacks %q", diff, want)
		}
	}
	out, errOut, code := c.run("session", "undo", "undoer")
	if code != 1 || !strings.Contains(out, "conflict mine.txt:") {
		t.Errorf("session undo: exit %d, want 1 with mine.txt's conflict\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for name, want := range map[string]string{"edit.txt": "alpha\nbeta\n", "gone.txt": "farewell\n", "mine.txt": "person again\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s after undo: %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("made.txt after undo: %v, want it gone", err)
	}
}
