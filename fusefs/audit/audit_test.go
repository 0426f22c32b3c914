package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/errcode"
)

// syncBuffer is an audit sink safe for the Auditor's serialised writes and
// the test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// bytes is a copy of what was written so far.
func (b *syncBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func ctxPid(pid uint32) context.Context {
	return fuse.NewContext(context.Background(), &fuse.Caller{Pid: pid})
}

// auditLines parses JSON lines into maps, so that fields an Event lacks
// (a rotation header's) are seen too.
func auditLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// summary is "op path repeat" of each line, for comparing sequences.
func summary(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		s := l["op"].(string) + " " + l["path"].(string)
		if r, ok := l["repeat"]; ok {
			s += " x" + jsonNum(r)
		}
		out = append(out, s)
	}
	return out
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAuditCoalesces: a loop of one refusal gives its first line at once
// and one line with a repeat count per window, written when a different
// refusal comes, at Tick once the window has passed, or at Close.
func TestAuditCoalesces(t *testing.T) {
	var buf syncBuffer
	clk := newFakeClock()
	a := New(&buf, clk.now, time.Second)
	deny := func(path string) {
		a.Record(ctxPid(7), "open", path, errcode.CredentialPathDenied, syscall.EACCES)
	}
	lines := func() []string { return summary(auditLines(t, buf.bytes())) }

	deny(".env")
	if got := lines(); len(got) != 1 {
		t.Fatalf("first refusal not written at once: %q", got)
	}
	for range 1000 {
		clk.advance(time.Millisecond / 2)
		deny(".env")
	}
	if got := lines(); len(got) != 1 {
		t.Fatalf("repeats within the window written: %q", got)
	}
	a.Tick() // the window has not passed: nothing yet
	if got := lines(); len(got) != 1 {
		t.Fatalf("Tick inside the window wrote: %q", got)
	}
	// A different refusal writes the held count first.
	deny(".aws/credentials")
	want := []string{"open .env", "open .env x1000", "open .aws/credentials"}
	if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	// One repeat alone is an ordinary line.
	deny(".aws/credentials")
	deny(".env")
	want = append(want, "open .aws/credentials", "open .env")
	if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	// Past the window, Tick writes what is held, and the next refusal of
	// that kind starts a window of its own, written at once.
	deny(".env")
	deny(".env")
	clk.advance(time.Second)
	a.Tick()
	deny(".env")
	want = append(want, "open .env x2", "open .env")
	if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	// A repeat after the window ends it without a Tick.
	deny(".env")
	clk.advance(1500 * time.Millisecond)
	deny(".env")
	want = append(want, "open .env", "open .env")
	if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	// Close writes what is held.
	deny(".env")
	deny(".env")
	deny(".env")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "open .env x3")
	if got := lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
}

// TestAuditCoalesceKey: a refusal differing in op, code, errno, owner or
// path is not a repeat.
func TestAuditCoalesceKey(t *testing.T) {
	var buf syncBuffer
	clk := newFakeClock()
	a := New(&buf, clk.now, time.Second)
	a.proc = t.TempDir()
	for _, pid := range []string{"1", "2", "3"} {
		fakeProgram(t, a.proc)(pid, "sh", "/usr/bin/sh")
	}
	owner := "cgroup:/a"
	a.Owner = func(uint32) string { return owner }
	a.Record(ctxPid(1), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES)
	a.Record(ctxPid(1), "rename", ".env", errcode.CredentialPathDenied, syscall.EACCES)
	a.Record(ctxPid(1), "rename", ".env", errcode.PathEscape, syscall.EACCES)
	a.Record(ctxPid(1), "rename", ".env", errcode.PathEscape, syscall.EBUSY)
	owner = "cgroup:/b"
	a.Record(ctxPid(1), "rename", ".env", errcode.PathEscape, syscall.EBUSY)
	a.Record(ctxPid(1), "rename", ".env2", errcode.PathEscape, syscall.EBUSY)
	// Another pid of the same owner and program is a repeat; the line has
	// its pid.
	a.Record(ctxPid(2), "rename", ".env2", errcode.PathEscape, syscall.EBUSY)
	a.Record(ctxPid(3), "rename", ".env2", errcode.PathEscape, syscall.EBUSY)
	a.Close()
	lines := auditLines(t, buf.bytes())
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7: %v", len(lines), lines)
	}
	if last := lines[6]; jsonNum(last["repeat"]) != "2" || jsonNum(last["pid"]) != "3" {
		t.Errorf("last line = %v, want repeat 2, pid 3", last)
	}
}

// TestAuditPathEscapes: names that are not UTF-8 are written losslessly
// and distinctly; UTF-8 names are written as they are.
func TestAuditPathEscapes(t *testing.T) {
	cases := []struct {
		in, out string
		escaped bool
	}{
		{"a/.env", "a/.env", false},
		{`a\b/é.pem`, `a\b/é.pem`, false},
		{"a/\xff.pem", `a/\xff.pem`, true},
		{"a/\xfe.pem", `a/\xfe.pem`, true},
		{"a/\xef\xbf\xbd.pem", "a/\uFFFD.pem", false}, // a real U+FFFD
		{"a\\/\xff", `a\\/\xff`, true},
		{`\xff` + "\xff", `\\xff\xff`, true},
		{"é\xc3", `é\xc3`, true},
	}
	seen := map[string]string{}
	for _, c := range cases {
		var buf syncBuffer
		a := New(&buf, newFakeClock().now, time.Second)
		a.Record(ctxPid(1), "open", c.in, errcode.CredentialPathDenied, syscall.EACCES)
		a.Close()
		lines := auditLines(t, buf.bytes())
		if len(lines) != 1 {
			t.Fatalf("%q: %d lines", c.in, len(lines))
		}
		l := lines[0]
		esc, _ := l["escaped"].(bool)
		if l["path"] != c.out || esc != c.escaped {
			t.Errorf("%q: path %q escaped %v, want %q %v", c.in, l["path"], esc, c.out, c.escaped)
		}
		key := jsonNum(l["path"]) + jsonNum(esc)
		if prev, ok := seen[key]; ok {
			t.Errorf("%q and %q give the same record", prev, c.in)
		}
		seen[key] = c.in
	}
}

// TestAuditRotates: the file is rotated to FILE.1 before it would pass its
// bound, one generation is kept, and the fresh file's first line counts
// what was coalesced since the last rotation.
func TestAuditRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	clk := newFakeClock()
	const max = 2000
	a, err := openLog(path, max, clk.now, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Coalesce 10 repeats into one line, then write distinct lines until
	// the file has rotated twice.
	for range 11 {
		a.Record(ctxPid(1), "open", ".env", errcode.CredentialPathDenied, syscall.EACCES)
	}
	n := 0
	for rotations := 0; rotations < 2; n++ {
		before, _ := os.Stat(path)
		a.Record(ctxPid(1), "open", "k/"+strings.Repeat("x", n%7)+".pem", errcode.CredentialPathDenied, syscall.EACCES)
		after, _ := os.Stat(path)
		if after.Size() < before.Size() {
			rotations++
		}
		if n > 1000 {
			t.Fatal("never rotated")
		}
	}
	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > max {
			t.Errorf("%s is %d bytes, bound %d", p, st.Size(), max)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", p, st.Mode())
		}
	}
	if _, err := os.Stat(path + ".2"); err == nil {
		t.Error("more than one old generation kept")
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := auditLines(t, cur)
	hdr := lines[0]
	if hdr["op"] != "rotate" || hdr["rotated"] != path+".1" || jsonNum(hdr["coalesced"]) != "0" || jsonNum(hdr["dropped"]) != "0" {
		t.Errorf("header of the fresh file = %v", hdr)
	}
	old, _ := os.ReadFile(path + ".1")
	if hdr1 := auditLines(t, old)[0]; hdr1["op"] != "rotate" || jsonNum(hdr1["coalesced"]) != "9" {
		t.Errorf("header of the first rotation = %v, want 9 coalesced (10 repeats, one line)", hdr1)
	}
}

// TestAuditConflictNamesHolder: a LOCK_CONFLICT line names the owner
// holding the lock, and two conflicts with different holders are two
// lines, not one repeat.
func TestAuditConflictNamesHolder(t *testing.T) {
	var buf syncBuffer
	a := New(&buf, newFakeClock().now, time.Second)
	a.proc = t.TempDir()
	fakeProgram(t, a.proc)("9", "vim", "/usr/bin/vim")
	a.RecordConflict(ctxPid(7), "open", "main.go", syscall.EBUSY, "lock:other-owner", Holder{Owner: "cgroup:/a.scope", Pid: 9})
	a.RecordConflict(ctxPid(7), "open", "main.go", syscall.EBUSY, "lock:other-owner", Holder{Owner: "cgroup:/b.scope"})
	a.Flush()
	var got []string
	for sc := bufio.NewScanner(bytes.NewReader(buf.bytes())); sc.Scan(); {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Code != errcode.LockConflict || ev.Rule != "lock:other-owner" {
			t.Errorf("line %s: want LOCK_CONFLICT by lock:other-owner", sc.Bytes())
		}
		got = append(got, fmt.Sprintf("%s %d %s %s", ev.Holder, ev.HolderPid, ev.HolderComm, ev.HolderExe))
	}
	if want := []string{"cgroup:/a.scope 9 vim /usr/bin/vim", "cgroup:/b.scope 0  "}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("holders %q, want %q", got, want)
	}
}
