package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeFirstMount runs the README's "Mount your own directory" lines
// as they are written (but the install line: the realmfs under test is
// first on PATH), with HOME a temp dir holding a project: the mount
// serves the project, a credential in it is refused, and the unmount line
// unmounts it.
func TestReadmeFirstMount(t *testing.T) {
	requireFUSE(t)
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "Mount your own directory:\n\n```sh\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal(`README.md has no "Mount your own directory:" block`)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if cmd, _, _ := strings.Cut(l, "#"); strings.TrimSpace(cmd) != "" && !strings.Contains(cmd, "make install") {
			lines = append(lines, strings.TrimSpace(cmd))
		}
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "realmfs ~/project ") || !strings.HasPrefix(lines[2], "fusermount3 -u ") {
		t.Fatalf("the README's first mount is not mkdir, realmfs, fusermount3 -u: %q", lines)
	}
	mnt := strings.Fields(lines[1])[2]
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "project", "hello.txt"), "hello\n")
	writeFile(t, filepath.Join(home, "project", ".env"), "KEY=secret\n")
	env := append(os.Environ(), "HOME="+home, "PATH="+binDir+":"+os.Getenv("PATH"))
	sh := func(line string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	sh(lines[0])
	sh(lines[1])
	t.Cleanup(func() { exec.Command("fusermount3", "-u", mnt).Run() })
	if fstype, _ := mountFSType(mnt); fstype != "fuse.realmfs" {
		t.Fatalf("%s after %q is %q, not a realmfs mount", mnt, lines[1], fstype)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "hello.txt")); err != nil || string(got) != "hello\n" {
		t.Errorf("hello.txt through the mount: %q, %v", got, err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, ".env")); err == nil {
		t.Error(".env through the mount was readable")
	}
	sh(lines[2])
	if fstype, mounted := mountFSType(mnt); mounted {
		t.Errorf("%s after %q is still a %s mount", mnt, lines[2], fstype)
	}
}
