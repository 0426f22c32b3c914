package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// refusedBy runs a program that the mount must refuse, and fails the test
// if it succeeds.
func refusedBy(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err == nil {
		t.Fatalf("%s %s succeeded on the mount: %s", name, strings.Join(args, " "), out)
	}
}

// wantWho checks that a refusal's line names the program that was refused
// (comm, and exe, the path of its binary) and the rule that refused it.
func wantWho(t *testing.T, e auditEntry, comm, rule, source string) {
	t.Helper()
	checkAuditFields(t, e)
	if e.str("comm") != comm || !strings.HasSuffix(e.str("exe"), "/"+comm) {
		t.Errorf("audit line names comm %q, exe %q; want %q and a path ending /%s: %v", e.str("comm"), e.str("exe"), comm, comm, e)
	}
	if e.str("rule") != rule || e.str("ruleSource") != source {
		t.Errorf("audit line names rule %q from %q; want %q from %q: %v", e.str("rule"), e.str("ruleSource"), rule, source, e)
	}
}

// TestAuditNamesProgramAndBuiltinRule: `cat .env` on the mount gives a
// line that says cat was refused and by which built-in glob, with the
// source --show-policy prints for it: who and why, after cat has exited.
func TestAuditNamesProgramAndBuiltinRule(t *testing.T) {
	requireTool(t, "cat")
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, filepath.Join(m.Backing, ".env"), "SECRET=1\n")
	}))
	refusedBy(t, "cat", m.Path(".env"))
	e := m.WaitRefusal("open", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	wantWho(t, e, "cat", "**/.env", "built-in: realm, shhgit, agentsh")
}

// TestAuditNamesPolicyFileLine: a refusal by a policy file's deny glob
// names the file and the line the glob is written on.
func TestAuditNamesPolicyFileLine(t *testing.T) {
	requireTool(t, "cat")
	var pol string
	m := mount(t, Prepare(func(m *Mount) {
		pol = filepath.Join(m.Root, "policy.yaml")
		writeFile(t, pol, "version: 1\ncredentials:\n  deny:\n    - 'plans/**'\n    - '**/*.secret'\n")
		writeFile(t, filepath.Join(m.Backing, "q3.secret"), "x\n")
		m.cfg.flags = append(m.cfg.flags, "--policy", pol)
	}))
	refusedBy(t, "cat", m.Path("q3.secret"))
	e := m.WaitRefusal("open", "q3.secret", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	wantWho(t, e, "cat", "**/*.secret", "policy:"+pol+":5")
}

// TestAuditNamesRefusalRule: refusals no glob made carry the id of their
// rule: an escaping symlink's target, a device node.
func TestAuditNamesRefusalRule(t *testing.T) {
	requireTool(t, "readlink", "mknod")
	m := mount(t, Prepare(func(m *Mount) {
		if err := os.Symlink("/etc/passwd", filepath.Join(m.Backing, "out")); err != nil {
			t.Fatal(err)
		}
	}))
	refusedBy(t, "readlink", m.Path("out"))
	e := m.WaitRefusal("readlink", "out", "PATH_ESCAPE", unix.EACCES)
	wantWho(t, e, "readlink", "escape:symlink-target", "")

	if os.Geteuid() == 0 {
		refusedBy(t, "mknod", m.Path("null"), "c", "1", "3")
		e = m.WaitRefusal("mknod", "null", "DEVICE_NODE_DENIED", unix.EPERM)
		wantWho(t, e, "mknod", "device-node", "")
	}
}
