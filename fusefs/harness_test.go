package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/fusefs/templive"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/policy"
)

// The unit tests here drive the guard's node and handle methods directly,
// without a mount: a real FS over a temp backing dir, its root attached to
// a go-fuse bridge that has no kernel behind it (invalidations answer
// ENOSYS). Children are attached by hand, as the bridge would after a
// LOOKUP or CREATE. Calls carry no fuse.Caller: the caller is root, pid 0.

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

// events parses the audit lines written so far.
func (b *syncBuffer) events(t testing.TB) []audit.Event {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var evs []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

type testFS struct {
	*FS
	backing string
	audit   *syncBuffer
	logs    *syncBuffer
}

// newTestFS builds a guard over a fresh backing dir with the built-in
// credential set, and lets opts adjust the options first.
func newTestFS(t testing.TB, opts func(*Options)) *testFS {
	t.Helper()
	backing := t.TempDir()
	auditBuf, logs := &syncBuffer{}, &syncBuffer{}
	o := Options{
		// No coalescing: each test reads the line of each refusal it makes
		// (audit_test.go tests coalescing with its own clock).
		Audit:       audit.New(auditBuf, time.Now, 0),
		Credentials: policy.Default().Matcher(),
		NoWatch:     true,
		Logf: func(format string, args ...any) {
			logs.Write(fmt.Appendf(nil, format+"\n", args...))
		},
		// The daemon log at --debug: tests read both levels.
		Debugf: func(format string, args ...any) {
			logs.Write(fmt.Appendf(nil, "debug: "+format+"\n", args...))
		},
	}
	if opts != nil {
		opts(&o)
	}
	f, err := New(backing, o)
	if err != nil {
		t.Fatal(err)
	}
	fs.NewNodeFS(f.Root(), &fs.Options{RootStableAttr: f.RootStableAttr()})
	if res := f.gate.Scan(); res.Err != nil {
		t.Fatal(res.Err)
	}
	// After the Close below (cleanups run last first): a write the
	// protocol rejected an event of says so in the log (protocolEnded).
	t.Cleanup(func() {
		if l := logs.String(); strings.Contains(l, writeproto.Marker) {
			t.Errorf("the write protocol rejected an event:\n%s", l)
		}
	})
	t.Cleanup(func() { f.Close() })
	return &testFS{FS: f, backing: backing, audit: auditBuf, logs: logs}
}

// write puts a file into the backing dir, as a process outside the mount.
func (tf *testFS) write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(tf.backing, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// read is a backing file's content; "" and false if it is absent.
func (tf *testFS) read(t testing.TB, name string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tf.backing, name))
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// lookup finds name in the root and attaches its node, as the bridge does
// after a LOOKUP.
func (tf *testFS) lookup(t testing.TB, name string) *Node {
	t.Helper()
	var out fuse.EntryOut
	in, errno := tf.root.Lookup(context.Background(), name, &out)
	if errno != 0 {
		t.Fatalf("lookup %q: %v", name, errno)
	}
	tf.root.AddChild(name, in, true)
	return asNode(in)
}

// snapshot is the backing dir's names (temps included) with each regular
// file's content: what a refused operation must leave as it was.
func (tf *testFS) snapshot(t testing.TB) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(tf.backing, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tf.backing, p)
		line := rel + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// temps lists the names in the backing root that are realm temps.
func (tf *testFS) temps(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(tf.backing)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if hiddenName(e.Name()) && e.Name() != templive.Dir { // the marks of live daemons: not temps
			out = append(out, e.Name())
		}
	}
	return out
}

// codes are the audit codes written so far, with their ops.
func (tf *testFS) codes(t testing.TB) []string {
	if tf.opts.Audit != nil {
		tf.opts.Audit.Flush() // a repeat held for coalescing is a line so far
	}
	var out []string
	for _, ev := range tf.audit.events(t) {
		out = append(out, ev.Op+" "+string(ev.Code)+" "+ev.Errno)
	}
	return out
}

// String is what was written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wantContent fails unless the backing file name holds want.
func (tf *testFS) wantContent(t testing.TB, name, want, when string) {
	t.Helper()
	if got, ok := tf.read(t, name); !ok || got != want {
		t.Errorf("%s: %s = %q (present: %v), want %q", when, name, got, ok, want)
	}
}

// wantNoTemps fails if a realm temp is left in the backing root.
func (tf *testFS) wantNoTemps(t testing.TB) {
	t.Helper()
	if tmp := tf.temps(t); len(tmp) != 0 {
		t.Errorf("temps left: %q", tmp)
	}
}

// wantAudit fails unless the audit lines so far are want ("op CODE ERRNO").
func (tf *testFS) wantAudit(t testing.TB, want ...string) {
	t.Helper()
	if got := tf.codes(t); !slices.Equal(got, want) {
		t.Errorf("audit = %q, want %q", got, want)
	}
}

// wantUnchanged fails unless the backing dir is as snapshot before.
func (tf *testFS) wantUnchanged(t testing.TB, before []string) {
	t.Helper()
	if after := tf.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("backing dir changed:\nbefore %q\nafter  %q", before, after)
	}
}
