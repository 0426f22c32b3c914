package journal

import (
	"runtime"
	"testing"
	"time"

	"github.com/realm-dev/realm/fusefs/journal/logsync"
)

// TestWriteThrough: with Options.Durable on a filesystem whose fsyncs
// flush (logsync.FlushesCover), the intent of an empty object's making (create,
// mkdir) is written to the device and not flushed; every other intent,
// and a making where the filesystem does not say so, is flushed before
// Begin returns, with the link it keeps; on a filesystem that orders its
// metadata behind flushes (Options.Ordered) none is.
func TestWriteThrough(t *testing.T) {
	for _, tc := range []struct {
		name      string
		op        Op
		covers    bool
		ordered   bool // Options.Ordered: every intent written through
		keep      bool
		wantFlush bool
	}{
		{name: "create", op: OpCreate, covers: true},
		{name: "mkdir", op: OpMkdir, covers: true},
		{name: "symlink", op: OpSymlink, covers: true, wantFlush: true},
		{name: "rename keeping a link", op: OpRename, covers: true, keep: true, wantFlush: true},
		{name: "rewrite keeping a link", op: OpRewrite, covers: true, keep: true, wantFlush: true},
		{name: "rewrite keeping a link, no cover", op: OpRewrite, keep: true, wantFlush: true},
		{name: "create, no cover", op: OpCreate, wantFlush: true},
		{name: "rename keeping a link, ordered", op: OpRename, covers: true, ordered: true, keep: true},
		{name: "symlink, ordered", op: OpSymlink, covers: true, ordered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBacking(t)
			j := b.open(t, Options{Durable: true})
			j.flush = logsync.Policy{Covers: tc.covers, Ordered: tc.ordered}
			rec := Record{Owner: "session:1", Op: tc.op, Path: "f"}
			keep := NoKeep
			if tc.keep {
				b.write(t, "old", "old")
				rec.Before = ObjectOf(b.stat(t, "old"))
				keep = b.pathFd(t, "old")
			}
			if tc.op == OpRename {
				rec.To = "g"
			}
			c, err := j.Begin(rec, keep)
			must(t, err)
			j.mu.Lock()
			flushed := j.durable == j.written && j.keptDurable == j.keptGen
			completed := j.completed == j.written
			j.mu.Unlock()
			if flushed != tc.wantFlush {
				t.Errorf("the intent (and its link) flushed before Begin returned: %v, want %v", flushed, tc.wantFlush)
			}
			if !completed {
				t.Errorf("the intent was not written to the device before Begin returned")
			}
			must(t, c.Done(nil))
		})
	}
}

// TestEndsTimerFollowsHeldLines: a held removal's lines set the timer
// that writes them; written with the next lines (here WriteHeld) they stop
// it, so that a busy journal's timer does not fire; lines left held are
// written when it fires.
func TestEndsTimerFollowsHeldLines(t *testing.T) {
	b := newBacking(t)
	j, err := Open(b.root, DefaultDir, Options{})
	must(t, err)
	defer j.Close()
	b.write(t, "d/f", "f")
	b.write(t, "d/g", "g")
	dir := b.dirFd(t, "d")
	armed := func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.armed
	}
	_, err = j.Remove(Record{Owner: "pid:1", Op: OpUnlink, Path: "d/f"}, dir, "f")
	must(t, err)
	if !armed() {
		t.Fatal("lines held, no timer set")
	}
	must(t, j.WriteHeld())
	if armed() {
		t.Fatal("the held lines written, the timer still set")
	}
	_, err = j.Remove(Record{Owner: "pid:1", Op: OpUnlink, Path: "d/g"}, dir, "g")
	must(t, err)
	deadline := time.Now().Add(time.Minute) // a deadline for a hang, not a measure
	for armed() {
		if time.Now().After(deadline) {
			t.Fatal("the timer never wrote the held lines")
		}
		runtime.Gosched()
	}
	j.mu.Lock()
	held := len(j.ends)
	j.mu.Unlock()
	if held != 0 {
		t.Errorf("%d bytes still held after the timer fired", held)
	}
}
