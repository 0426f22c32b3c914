package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// realmfsAudit runs realmfs audit with args and returns its stdout, failing
// the test unless it exits with want.
func realmfsAudit(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(realmfsBin, append([]string{"audit"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("realmfs audit %s: exit %d, want %d; stderr %s", strings.Join(args, " "), code, want, errb.String())
	}
	return out.String(), errb.String()
}

// TestRealmfsAudit: refusals made on a real mount read back through
// realmfs audit MOUNTPOINT (the daemon's record names its audit log) as a
// table with program, owner and rule; a lock conflict names its holder,
// in the table and in the JSON line; --code selects, and an unknown code
// is a usage error that lists the known ones.
func TestRealmfsAudit(t *testing.T) {
	requireTool(t, "cat")
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "SECRET=1\n")
		writeFile(t, m.BackingPath("main.go"), "package main\n")
	}))
	refusedBy(t, "cat", m.Path(".env"))
	finish := holdWrite(t, m.Path("main.go"), "the holder's\n")
	var werr error
	lockedThread(func() { werr = closeFd(unix.Open(m.Path("main.go"), unix.O_WRONLY|unix.O_CLOEXEC, 0)) })
	wantErrno(t, werr, unix.EBUSY, "a second owner's write open of a file another writes")
	finish()
	conflict := m.WaitRefusal("open", "main.go", "LOCK_CONFLICT", unix.EBUSY)
	// Under lockowner=pid the holder's owner is pid:N of the process that
	// opened the file, which the line names as holderPid, with its program.
	holder := conflict.str("holder")
	if !strings.HasPrefix(holder, "pid:") || holder == conflict.str("owner") ||
		conflict.str("holderPid") != strings.TrimPrefix(holder, "pid:") || conflict.str("holderComm") == "" {
		t.Errorf("LOCK_CONFLICT line names holder %q, pid %s, comm %q (caller's owner %q); want the other owner, pid:N, its pid N and program: %v",
			holder, conflict.str("holderPid"), conflict.str("holderComm"), conflict.str("owner"), conflict)
	}
	m.WaitRefusal("open", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES)

	table, _ := realmfsAudit(t, 0, m.Dir)
	rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(rows) < 3 || !strings.HasPrefix(rows[0], "TIME") || !strings.Contains(rows[0], "PROGRAM") {
		t.Fatalf("realmfs audit %s:\n%s", m.Dir, table)
	}
	var sawCat, sawHolder bool
	for _, r := range rows[1:] {
		sawCat = sawCat || strings.Contains(r, "CREDENTIAL_PATH_DENIED") && strings.Contains(r, " cat ") && strings.Contains(r, "**/.env") && strings.HasSuffix(r, ".env")
		sawHolder = sawHolder || strings.Contains(r, "LOCK_CONFLICT") &&
			strings.HasSuffix(r, "main.go (held by "+holder+", pid "+conflict.str("holderPid")+" "+conflict.str("holderComm")+")")
	}
	if !sawCat || !sawHolder {
		t.Errorf("table lacks cat's refusal (%v) or the conflict's holder %s (%v):\n%s", sawCat, holder, sawHolder, table)
	}

	js, _ := realmfsAudit(t, 0, m.AuditLog, "--code", "LOCK_CONFLICT", "-o", "json", "-n", "-1")
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		var ev struct{ Code, Holder string }
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Code != "LOCK_CONFLICT" || ev.Holder == "" {
			t.Errorf("--code LOCK_CONFLICT -o json printed %q (%v)", l, err)
		}
	}
	if _, stderr := realmfsAudit(t, 2, m.Dir, "--code", "NOPE"); !strings.Contains(stderr, "LOCK_CONFLICT") {
		t.Errorf("--code NOPE: stderr %q, want the known codes", stderr)
	}
}

// TestRealmfsAuditFollow: realmfs audit -f -n 0 prints the header, then a
// row for each refusal as the daemon writes it, in the header's columns.
// The test waits on the rows arriving on the pipe.
func TestRealmfsAuditFollow(t *testing.T) {
	requireTool(t, "cat")
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "SECRET=1\n")
		writeFile(t, m.BackingPath("id_rsa"), "KEY\n")
	}))
	p := startProc(t, exec.Command(realmfsBin, "audit", m.Dir, "-f", "-n", "0"), true)
	header := p.line(t, stateTimeout, "realmfs audit -f header")
	if !strings.HasPrefix(header, "TIME") {
		t.Fatalf("first line %q, want the header", header)
	}
	pathAt := strings.Index(header, "PATH")
	// Two refusals of two paths: each is a line of its own, written at once.
	for _, name := range []string{".env", "id_rsa"} {
		refusedBy(t, "cat", m.Path(name))
		row := p.line(t, stateTimeout, "realmfs audit -f row of "+name)
		i := strings.LastIndex(row, "  ") + 2
		if !strings.HasSuffix(row, name) || utf8.RuneCountInString(row[:i]) != pathAt {
			t.Fatalf("followed row does not line up with the header:\n%s\n%s", header, row)
		}
	}
}
