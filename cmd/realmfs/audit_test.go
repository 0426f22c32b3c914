package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/realm-dev/realm/fusefs/audit"
)

// auditFixture is a log of five lines (and a rotation's first line), a
// minute apart from 10:00, in two owners.
func auditFixture(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"time":"2026-12-03T09:59:00Z","op":"rotate","rotated":"x.1","coalesced":0,"dropped":0}` + "\n")
	lines := []struct{ code, owner, path, holder string }{
		{"CREDENTIAL_PATH_DENIED", "cgroup:/a.scope", ".env", ""},
		{"LOCK_CONFLICT", "cgroup:/b.scope", "main.go", "cgroup:/a.scope"},
		{"PATH_ESCAPE", "cgroup:/a.scope", "link", ""},
		{"CREDENTIAL_PATH_DENIED", "cgroup:/b.scope", "id_rsa", ""},
		{"PROTECTED_PATH_DENIED", "cgroup:/a.scope", ".git/hooks/pre-commit", ""},
	}
	for i, l := range lines {
		fmt.Fprintf(&b, `{"time":"2026-12-03T10:%02d:00Z","op":"open","path":%q,"code":%q,"errno":"EACCES","pid":%d,"comm":"cat","exe":"/usr/bin/cat","uid":0,"owner":%q,"rule":"r","holder":%q}`+"\n",
			i, l.path, l.code, 100+i, l.owner, l.holder)
	}
	b.WriteString(`{"time":"2026-12-03T10:09:00Z","op":"open","path":"partial`) // being written
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuditArgs: the usage errors name what is wrong; an unknown --code
// lists the known ones.
func TestAuditArgs(t *testing.T) {
	log := auditFixture(t)
	tests := []struct {
		args   []string
		code   int
		stderr string // "" : none
	}{
		{[]string{log}, 0, ""},
		{[]string{log, "--code", "lock_conflict", "-n", "-1", "-o", "json", "--owner", "cgroup:/a", "--since", "1h"}, 0, ""},
		{[]string{log, "--code", "NOPE"}, 2, "the codes are PATH_ESCAPE, PROTECTED_PATH_DENIED"},
		{[]string{log, "-n", "-2"}, 2, "-n -2"},
		{[]string{log, "-o", "yaml"}, 2, `-o "yaml": want json`},
		{[]string{log, "--since", "yesterday"}, 2, "RFC3339"},
		{[]string{log, log}, 2, "want one MOUNTPOINT or FILE"},
		{[]string{filepath.Dir(log)}, 2, "is a directory but no realmfs mount"},
		{[]string{log + ".missing"}, 2, "no such file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			_, code, ok := parseAuditArgs(tt.args, &out, &errb, time.Now())
			if ok != (tt.code == 0) || !ok && code != tt.code {
				t.Errorf("ok %v, exit %d; want exit %d", ok, code, tt.code)
			}
			if tt.stderr == "" && errb.Len() > 0 || !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", errb.String(), tt.stderr)
			}
		})
	}
}

// TestAuditTail: -n counts the lines that pass the filters, 0 is none and
// -1 all; --code, --owner and --since select; a rotation's line and a
// partial last line are never printed.
func TestAuditTail(t *testing.T) {
	log := auditFixture(t)
	tests := []struct {
		args []string
		want []string // the paths printed
	}{
		{nil, []string{".env", "main.go", "link", "id_rsa", ".git/hooks/pre-commit"}},
		{[]string{"-n", "2"}, []string{"id_rsa", ".git/hooks/pre-commit"}},
		{[]string{"-n", "0"}, nil},
		{[]string{"-n", "-1"}, []string{".env", "main.go", "link", "id_rsa", ".git/hooks/pre-commit"}},
		{[]string{"--code", "CREDENTIAL_PATH_DENIED"}, []string{".env", "id_rsa"}},
		{[]string{"--code", "CREDENTIAL_PATH_DENIED", "-n", "1"}, []string{"id_rsa"}},
		{[]string{"--owner", "cgroup:/b.scope"}, []string{"main.go", "id_rsa"}},
		{[]string{"--since", "2026-12-03T10:03:00Z"}, []string{"id_rsa", ".git/hooks/pre-commit"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			ac, _, ok := parseAuditArgs(append([]string{log, "-o", "json"}, tt.args...), &out, &errb, time.Now())
			if !ok {
				t.Fatalf("parse: %s", errb.String())
			}
			f, err := os.Open(ac.source)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rest, err := audit.Tail(f, ac.filter, ac.lines, audit.NewPrinter(&out, true))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(rest), `{"time":"2026-12-03T10:09:00Z"`) {
				t.Errorf("rest %q, want the partial line", rest)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if ev, ok := audit.ParseLine([]byte(l)); ok {
					got = append(got, ev.Path)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("paths %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAuditTable: every row's columns start where the header's do, however
// long its cells; a conflict names its holder, a repeat its count.
func TestAuditTable(t *testing.T) {
	lines := []string{
		`{"time":"2026-12-03T10:00:00Z","op":"commit:sync-appends","path":"a","code":"WRITE_NOT_ATOMIC","errno":"EOPNOTSUPP","comm":"","exe":"/usr/lib/very/long/program-name","owner":"cgroup:/machine.slice/libpod-0123456789abcdef.scope","rule":"credential:unscanned"}`,
		`{"time":"2026-12-03T10:00:01Z","op":"open","path":"main.go","code":"LOCK_CONFLICT","errno":"EBUSY","comm":"vim","owner":"session:7","rule":"lock:other-owner","holder":"session:3","holderPid":42,"holderComm":"make"}`,
		`{"time":"2026-12-03T10:00:02Z","op":"open","path":".env","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","comm":"cat","rule":"**/.env","repeat":12}`,
	}
	var out bytes.Buffer
	p := audit.NewPrinter(&out, false)
	p.Header()
	for _, l := range lines {
		p.Print([]byte(l), audit.Filter{})
	}
	rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(rows) != 4 {
		t.Fatalf("rows:\n%s", out.String())
	}
	pathAt := strings.Index(rows[0], "PATH")
	for _, r := range rows[1:] {
		runes := []rune(r)
		if utf8.RuneCountInString(rows[0][:pathAt]) > len(runes) || runes[pathAt-1] != ' ' || runes[pathAt] == ' ' {
			t.Errorf("row does not line up with the header:\n%s\n%s", rows[0], r)
		}
	}
	for i, want := range []string{"…-0123456789abcdef.scope", "main.go (held by session:3, pid 42 make)", ".env (x12)"} {
		if !strings.Contains(rows[i+1], want) {
			t.Errorf("row %q lacks %q", rows[i+1], want)
		}
	}
	if !strings.Contains(rows[1], "program-name") {
		t.Errorf("row %q: PROGRAM should fall back to the exe's name", rows[1])
	}
}

// TestFollowAudit: -f prints lines as they are written, completes the
// partial line, and follows the log into a fresh file after rotation
// (rename and create, as the daemon's own rotation and logrotate do) and
// after a truncation in place. It waits on the lines, never on a clock.
func TestFollowAudit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(path, []byte("one\ntw"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil { // as audit.Tail leaves it
		t.Fatal(err)
	}
	got := make(chan string, 16)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- audit.Follow(f, path, []byte("tw"), stop, func(l []byte) { got <- string(l) })
	}()
	appendTo := func(p, s string) {
		t.Helper()
		w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		if l := <-got; l != want {
			t.Fatalf("followed %q, want %q", l, want)
		}
	}
	appendTo(path, "o\n")
	expect("two\n")
	appendTo(path, "three\n")
	expect("three\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(path+".1", "four\n") // the daemon writes on to the old file until it reopens
	expect("four\n")
	appendTo(path, "five\n")
	expect("five\n")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(path, "six\n")
	expect("six\n")
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// lateWriter is realmfs audit's stdout for TestAuditFollowsWhatComesAfterTheHeader:
// its first write (the header) appends a line to the log, as a refusal
// that a caller waiting for the header causes; seen is closed once a
// printed row names that line's path.
type lateWriter struct {
	t    *testing.T
	log  string
	mu   sync.Mutex
	out  bytes.Buffer
	seen chan struct{}
}

func (w *lateWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() == 0 {
		f, err := os.OpenFile(w.log, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			w.t.Error(err)
		} else {
			fmt.Fprintf(f, `{"time":"2026-12-03T10:10:00Z","op":"open","path":"late","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":9,"comm":"cat","exe":"/usr/bin/cat","uid":0,"owner":"pid:9"}`+"\n")
			f.Close()
		}
	}
	w.out.Write(b)
	if strings.Contains(w.out.String(), "late") && w.seen != nil {
		close(w.seen)
		w.seen = nil
	}
	return len(b), nil
}

// TestAuditFollowsWhatComesAfterTheHeader: with -f -n 0 a line written
// once the header is out is printed: the tail is the log as it stood
// before the header, so a read to its end that comes after the line does
// not swallow it as an old one (TestRealmfsAuditFollow lost a row so on a
// loaded machine). Without -f the line is not printed: it came after.
func TestAuditFollowsWhatComesAfterTheHeader(t *testing.T) {
	for _, follow := range []bool{false, true} {
		log := filepath.Join(t.TempDir(), "audit.jsonl")
		if err := os.WriteFile(log, []byte(`{"time":"2026-12-03T10:00:00Z","op":"open","path":"old","code":"CREDENTIAL_PATH_DENIED","errno":"EACCES","pid":8,"comm":"cat","exe":"/usr/bin/cat","uid":0,"owner":"pid:8"}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w := &lateWriter{t: t, log: log, seen: make(chan struct{})}
		seen := w.seen
		args := []string{log, "-n", "-1"}
		if !follow {
			var errb bytes.Buffer
			if code := auditUntil(args, w, &errb, nil); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if out := w.out.String(); strings.Contains(out, "late") || !strings.Contains(out, "old") {
				t.Errorf("without -f: want the old line and not the late one:\n%s", out)
			}
			continue
		}
		stop := make(chan struct{})
		done := make(chan int)
		var errb bytes.Buffer
		go func() { done <- auditUntil(append(args, "-f", "-n", "0"), w, &errb, stop) }()
		select {
		case <-seen:
		case code := <-done:
			t.Fatalf("audit -f returned %d before the late line: %s", code, errb.String())
		case <-time.After(time.Minute): // a deadline for a hang, not a measure
			t.Fatal("audit -f -n 0 never printed the line written after its header")
		}
		close(stop)
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, errb.String())
		}
	}
}
