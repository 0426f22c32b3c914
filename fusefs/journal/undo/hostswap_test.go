package undo

// What a host process that changes BACKING from outside the mount (on an
// unmounted BACKING, or behind a mounted one) cannot make undo, running
// as root, do. Each test failed before its fix (an adversarial review of
// undo, 2026-12-04).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal"
)

const attackerUID = 1000

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon's undo runs as root and chowns")
	}
}

// TestUndoMetadataNotOnAReusedInode: undo of a chmod, chown or utimens
// checked the object at the name by (dev, ino) only. An attacker who
// removes the file and makes one of its own that gets the freed inode
// number (ext4 hands out the lowest free one) passed the check, and undo
// gave the attacker's file the old owner and mode: a root-owned set-uid
// file with the attacker's content. The object's ctime after the change
// (since.go) tells the two apart: a conflict, the attacker's file left as
// it is.
func TestUndoMetadataNotOnAReusedInode(t *testing.T) {
	needRoot(t)
	w := newWorld(t)
	// BACKING is the attacker's (a workspace of uid 1000); a root-owned
	// set-uid program in it (installed by root, say).
	w.must(os.Chown(w.dir, attackerUID, attackerUID))
	w.must(os.WriteFile(w.p("tool"), []byte("#!/bin/true real tool\n"), 0o755))
	w.must(os.Chown(w.p("tool"), 0, 0))
	w.must(unix.Chmod(w.p("tool"), 0o4755))
	old := w.obj("tool")
	if old.Mode&0o4000 == 0 || old.Uid != 0 {
		t.Fatalf("setup: tool mode %o uid %d", old.Mode, old.Uid)
	}
	// The owner undone (an agent's session) drops the set-uid bit through
	// the mount: the record's before is root's 04755.
	w.chmod("S", "tool", 0o755)

	// The attacker (uid 1000, the directory's owner) removes tool and
	// makes files until one has tool's inode number.
	w.must(os.Remove(w.p("tool")))
	var got bool
	for i := 0; i < 4096 && !got; i++ {
		name := w.p("payload")
		w.must(os.WriteFile(name, []byte("#!/bin/sh\necho attacker code\n"), 0o755))
		w.must(os.Chown(name, attackerUID, attackerUID))
		var st unix.Stat_t
		w.must(unix.Lstat(name, &st))
		if st.Ino == old.Ino && st.Dev == old.Dev {
			w.must(os.Rename(name, w.p("tool")))
			got = true
			break
		}
		// keep it (so the next file gets another number), under another name
		w.must(os.Rename(name, w.p(fmt.Sprintf("spare-%d", i))))
	}
	if !got {
		t.Skipf("the filesystem of %s gave no file tool's inode number again (not ext4?)", w.dir)
	}
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "S"}})
	w.must(err)
	t.Logf("undo: steps %+v conflicts %v", res.Steps, res.Conflicts)
	if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "tool" {
		t.Errorf("undo: conflicts %v, want tool's", res.Conflicts)
	}
	var st unix.Stat_t
	w.must(unix.Lstat(w.p("tool"), &st))
	body, _ := os.ReadFile(w.p("tool"))
	if st.Uid == 0 && st.Mode&0o4000 != 0 {
		t.Errorf("undo made the attacker's file (%q) root-owned and set-uid: uid %d mode %o", body, st.Uid, st.Mode&0o7777)
	} else if st.Uid != attackerUID {
		t.Errorf("undo changed the owner of the attacker's file (%q) to uid %d", body, st.Uid)
	}
}

// TestUndoAppendCutsWhatItChecked: undo of an append checked the object
// at the name (by identity), then opened the name again for writing and
// cut and re-timed what it opened, never checking that it was the object
// it checked (openChecked does now). A host process that renames another file
// over the name in between has the undo, as root, cut that file: here a
// hard link in BACKING (made by the host) to a file outside BACKING, which
// loses its content. The rename is made at the moment a host process would
// have to win (Options.Held runs between the check and the open; the
// daemon's undo passes the lock table there, an unmounted undo nothing: a
// plain race then).
func TestUndoAppendCutsWhatItChecked(t *testing.T) {
	needRoot(t)
	w := newWorld(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	const precious = "content of a file outside BACKING, root's, 0600\n"
	w.must(os.WriteFile(outside, []byte(precious), 0o600))
	// A hard link to it in BACKING (the host's, before or after the mount).
	w.must(os.Link(outside, w.p("hl")))

	w.must(os.WriteFile(w.p("log"), []byte("hello"), 0o644))
	before := w.obj("log")
	c, err := w.j.Begin(journal.Record{Owner: "S", Op: journal.OpAppend, Path: "log", Before: before}, journal.NoKeep)
	w.must(err)
	f, err := os.OpenFile(w.p("log"), os.O_WRONLY|os.O_APPEND, 0)
	w.must(err)
	_, err = f.WriteString(" appended by S\n")
	w.must(err)
	w.must(f.Close())
	w.must(c.Done(nil))

	var swapped atomic.Bool
	held := func(journal.ID) (string, bool) {
		if swapped.CompareAndSwap(false, true) {
			// the host process's rename, between undo's check and its open
			w.must(os.Rename(w.p("hl"), w.p("log")))
		}
		return "", false
	}
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "S"}, Held: held})
	w.must(err)
	t.Logf("undo: steps %+v conflicts %v", res.Steps, res.Conflicts)
	if b, _ := os.ReadFile(outside); string(b) != precious {
		t.Errorf("undo cut a file outside BACKING (through the link swapped in): it holds %q, want %q", b, precious)
	}
}

// TestUndoRenameOverADirChecksWhatItMade: undo of a rename over an empty
// directory moves the object back and makes the directory anew, then gave
// what it found at the name the old directory's owner and mode, never
// checking that it was the directory it made. A host process that
// exchanged its own file in right after the mkdir had undo, as root, give
// that file root:50 and the set-group-ID bit (a shared directory, 02775).
// The exchange is made at that moment (testHookAfterMkdir); undo refuses
// what it finds, and leaves it as it is.
func TestUndoRenameOverADirChecksWhatItMade(t *testing.T) {
	needRoot(t)
	w := newWorld(t)
	w.must(os.Chown(w.dir, attackerUID, attackerUID))
	// A shared empty set-gid directory, root:50 02775.
	w.must(os.Mkdir(w.p("shared"), 0o775))
	w.must(os.Chown(w.p("shared"), 0, 50))
	w.must(unix.Chmod(w.p("shared"), 0o2775))
	w.must(os.Mkdir(w.p("newdir"), 0o755))
	// The owner undone renames newdir over the empty shared/.
	rec := journal.Record{Owner: "S", Op: journal.OpRename, Path: "newdir", To: "shared", Before: w.obj("newdir"), Replaced: w.obj("shared")}
	c, err := w.j.Begin(rec, journal.NoKeep) // a directory replaced is not kept
	w.must(err)
	w.must(unix.Rename(w.p("newdir"), w.p("shared")))
	w.must(c.Done(nil))

	payload := w.p("payload")
	w.must(os.WriteFile(payload, []byte("#!/bin/sh\necho attacker code\n"), 0o755))
	w.must(os.Chown(payload, attackerUID, attackerUID))
	pfd, err := unix.Open(payload, unix.O_PATH|unix.O_NOFOLLOW, 0)
	w.must(err)
	defer unix.Close(pfd)
	testHookAfterMkdir = func() {
		w.must(unix.Renameat2(unix.AT_FDCWD, w.p("shared"), unix.AT_FDCWD, payload, unix.RENAME_EXCHANGE))
	}
	defer func() { testHookAfterMkdir = nil }()
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "S"}})
	w.must(err)
	t.Logf("undo: steps %+v conflicts %v", res.Steps, res.Conflicts)
	var st unix.Stat_t
	w.must(unix.Fstat(pfd, &st))
	if st.Uid != attackerUID || st.Mode&0o7777 != 0o755 {
		t.Errorf("undo gave the file swapped in for the directory it made uid %d gid %d mode %04o", st.Uid, st.Gid, st.Mode&0o7777)
	}
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Why, "not the directory made there") {
		t.Errorf("undo: conflicts %v, want shared's, saying what it found is not what it made", res.Conflicts)
	}
}

// TestUndoMetadataNotOnAFileChangedSince: the same object (inode and birth
// time), but written since by a host process: undo does not give its new
// content the owner and mode it had before the change (a set-user-ID bit
// on bytes nobody undoing looked at). Its ctime says it changed.
func TestUndoMetadataNotOnAFileChangedSince(t *testing.T) {
	w := newWorld(t)
	w.must(os.WriteFile(w.p("tool"), []byte("real tool\n"), 0o755))
	w.must(unix.Chmod(w.p("tool"), 0o4755))
	w.chmod("S", "tool", 0o755)
	f, err := os.OpenFile(w.p("tool"), os.O_WRONLY|os.O_APPEND, 0)
	w.must(err)
	_, err = f.WriteString("appended from outside\n")
	w.must(err)
	w.must(f.Close())
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "S"}})
	w.must(err)
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Why, "changed since") {
		t.Errorf("undo: steps %+v conflicts %v, want tool's, changed since", res.Steps, res.Conflicts)
	}
	if m := w.obj("tool").Mode & 0o7777; m != 0o755 {
		t.Errorf("tool's mode %04o after undo, want 0755 left as it was", m)
	}
}

// TestUndoMetadataAfterItsOwnSteps: undo's own steps move an object's
// ctime (a hard link of it removed into kept/); a later step of the same
// run takes the ctime it left for the change's, and puts the mode back.
func TestUndoMetadataAfterItsOwnSteps(t *testing.T) {
	w := newWorld(t)
	w.must(os.WriteFile(w.p("f"), []byte("body\n"), 0o640))
	w.must(os.Chmod(w.p("f"), 0o640))
	w.chmod("S", "f", 0o600)
	c, err := w.j.Begin(journal.Record{Owner: "S", Op: journal.OpLink, Path: "f", To: "h", Before: w.obj("f")}, journal.NoKeep)
	w.must(err)
	w.must(os.Link(w.p("f"), w.p("h")))
	w.must(c.Done(nil))
	w.chmod("S", "f", 0o644)
	res, err := Run(w.root, w.j, Options{Window: Window{Owner: "S"}})
	w.must(err)
	if len(res.Conflicts) != 0 {
		t.Errorf("undo: conflicts %v, want none", res.Conflicts)
	}
	if m := w.obj("f").Mode & 0o7777; m != 0o640 {
		t.Errorf("f's mode after undo %04o, want 0640 as before the first chmod", m)
	}
	if _, err := os.Lstat(w.p("h")); err == nil {
		t.Error("the link the owner made is still there")
	}
}
