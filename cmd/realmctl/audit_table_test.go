package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/sandbox"
)

// columnStarts are the offsets (in runes) at which a header's columns
// start.
func columnStarts(header string) []int {
	var starts []int
	r := []rune(header)
	for i := range r {
		if r[i] != ' ' && (i == 0 || r[i-1] == ' ' && i > 1 && r[i-2] == ' ') {
			starts = append(starts, i)
		}
	}
	return starts
}

// cellsAt cuts row at the header's column starts.
func cellsAt(row string, starts []int) []string {
	r := []rune(row)
	var cells []string
	for i, s := range starts {
		end := len(r)
		if i+1 < len(starts) {
			end = min(starts[i+1], len(r))
		}
		if s > len(r) {
			cells = append(cells, "")
			continue
		}
		cells = append(cells, strings.TrimSpace(string(r[s:end])))
	}
	return cells
}

// TestAuditTable: audit's table has PROGRAM, OWNER, SESSION and RULE; its
// rows line up with the header also when printed one batch at a time (as
// --follow does), whatever the cells' lengths; -o wide adds EXE and
// shortens nothing.
func TestAuditTable(t *testing.T) {
	state := t.TempDir()
	cid := strings.Repeat("ab", 32)
	rec := &sandbox.Record{ID: "0123456789ab", Name: "agent-1", State: sandbox.StateActive, Runtime: "podman",
		ContainerID: &cid, CreatedAt: time.Now()}
	if err := sandbox.NewStore(state).Save(rec); err != nil {
		t.Fatal(err)
	}
	owner := "cgroup:/machine.slice/libpod-" + cid + ".scope/container"
	lines := []auditLine{
		{Time: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Op: "open", Path: ".env", Code: "CREDENTIAL_PATH_DENIED", Errno: "EACCES",
			Pid: 10, Comm: "cat", Exe: "/usr/bin/cat", Uid: 1000, Owner: owner, Container: cid, Rule: "**/.env"},
		{Time: time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC), Op: "rename", Path: "a/../../x", Code: "PATH_ESCAPE", Errno: "EXDEV",
			Pid: 1234567, Exe: "/opt/tools/bin/some-long-program-name", Uid: 4294967294, Owner: "session:77", Rule: "escape:symlink-target"},
		{Time: time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC), Op: "open", Path: "secrets/a very long name.pem", Code: "WRITER_KILLED_RECOVERED",
			Errno: "ENOTEMPTY", Pid: 1, Uid: 0, Rule: "**/secrets/**/*.{pem,key,p12,pfx}", Repeat: 3},
	}
	tests := []struct {
		format string
		want   [][]string // cells of each row, header first
	}{
		{"text", [][]string{
			{"TIME", "OP", "CODE", "ERRNO", "PID", "UID", "PROGRAM", "OWNER", "SESSION", "RULE", "PATH"},
			{"2026-01-01T00:00:01Z", "open", "CREDENTIAL_PATH_DENIED", "EACCES", "10", "1000", "cat", "…bababab.scope/container", "agent-1", "**/.env", ".env"},
			{"2026-01-01T00:00:02Z", "rename", "PATH_ESCAPE", "EXDEV", "1234567", "4294967294", "some-long-prog…", "session:77", "-", "escape:symlink-target", "a/../../x"},
			{"2026-01-01T00:00:03Z", "open", "WRITER_KILLED_RECOVERED", "ENOTEMPTY", "1", "0", "-", "-", "-", "**/secrets/**/*.{pem,…", "secrets/a very long name.pem (x3)"},
		}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		c := &cli{g: newGlobals(), out: &output{format: tt.format, w: &out}}
		c.g.stateDir = state
		p := newAuditPrinter(c)
		p.header()
		p.flush()
		for _, l := range lines { // one batch each, as --follow prints them
			p.line(l)
			p.flush()
		}
		rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		starts := columnStarts(rows[0])
		if len(rows) != len(tt.want) || len(starts) != len(tt.want[0]) {
			t.Fatalf("%s: %d rows, %d columns:\n%s", tt.format, len(rows), len(starts), out.String())
		}
		for i, row := range rows {
			cells := cellsAt(row, starts)
			for j := range tt.want[i] {
				if cells[j] != tt.want[i][j] {
					t.Errorf("%s: row %d column %s = %q, want %q\n%s", tt.format, i, tt.want[0][j], cells[j], tt.want[i][j], out.String())
				}
			}
		}
	}
}

// TestAuditWide: -o wide adds EXE after PROGRAM and shortens no cell.
func TestAuditWide(t *testing.T) {
	state := t.TempDir()
	logDir := filepath.Join(state, "mounts")
	os.MkdirAll(logDir, 0o700)
	long := "cgroup:/user.slice/user-1000.slice/session-4.scope"
	line := `{"time":"2026-01-01T00:00:01Z","op":"open","path":".env","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":10,"comm":"cat","exe":"/usr/bin/cat","uid":1000,"owner":"` + long + `","rule":"**/.env"}` + "\n"
	if err := os.WriteFile(filepath.Join(logDir, "0011223344556677.audit.log"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--state-dir", state, "audit", "-o", "wide"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(rows) != 2 || !strings.Contains(rows[0], "PROGRAM          EXE ") || !strings.Contains(rows[1], "cat              /usr/bin/cat ") ||
		!strings.Contains(rows[1], long) {
		t.Errorf("audit -o wide:\n%s", out.String())
	}
}

// TestAuditYAML: -o yaml prints each line as a YAML document.
func TestAuditYAML(t *testing.T) {
	state := t.TempDir()
	logDir := filepath.Join(state, "mounts")
	os.MkdirAll(logDir, 0o700)
	lines := `{"time":"2026-01-01T00:00:01Z","op":"open","path":".env","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":10,"comm":"cat","rule":"**/.env"}
{"time":"2026-01-01T00:00:02Z","op":"rename","path":"a/../../x","code":"PATH_ESCAPE","errno":"EXDEV","pid":11,"rule":"escape:resolve"}
`
	if err := os.WriteFile(filepath.Join(logDir, "0011223344556677.audit.log"), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--state-dir", state, "audit", "-o", "yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	dec := yaml.NewDecoder(&out)
	var got []string
	for {
		var doc struct{ Path, Rule string }
		if err := dec.Decode(&doc); err != nil {
			break
		}
		got = append(got, doc.Path+" "+doc.Rule)
	}
	if want := []string{".env **/.env", "a/../../x escape:resolve"}; !slices.Equal(got, want) {
		t.Errorf("audit -o yaml documents %q, want %q", got, want)
	}
}

// TestAuditTableEscapesControlBytes: the PATH and PROGRAM cells of `realmctl
// audit` come from the agent (a file name it tried to open, its comm, which
// prctl(PR_SET_NAME) sets). The table shows them Go-quoted when they hold a
// control byte or invalid UTF-8, so a refused open of
// "/workspace/.env.<LF><forged row>" cannot add a forged row to the
// operator's table, and ESC sequences in comm or the path never reach the
// operator's terminal.
func TestAuditTableEscapesControlBytes(t *testing.T) {
	state := t.TempDir()
	logDir := filepath.Join(state, "mounts")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	forged := "2026-01-01T00:00:00Z  open       -                        -          1        0          sshd             -                         -             -                       all clear"
	line, err := json.Marshal(map[string]any{
		"time": "2026-01-01T00:00:01Z", "op": "open", "path": ".env.x\n" + forged,
		"code": "CREDENTIAL_PATH_DENIED", "errno": "EACCES", "pid": 10, "comm": "\x1b]0;pwned\x07cat", "uid": 1000, "rule": "**/.env.*",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "0011223344556677.audit.log"), append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--state-dir", state, "audit"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	rows := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(rows) != 2 || strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Fatalf("one refusal printed as %d rows (want header + 1), control bytes raw: %v\n%q", len(rows), strings.ContainsAny(out.String(), "\x1b\x07"), out.String())
	}
	if !strings.Contains(rows[1], `".env.x\n2026-01-01T00:00:00Z`) {
		t.Errorf("PATH not Go-quoted: %q", rows[1])
	}
}
