package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestIdleDirFdsBounded: directory nodes used one after another keep at
// most the bound of idle fds; one whose fd was closed opens it again at
// its next use, by handle where the daemon may, else by name, and a
// directory swapped behind the mount meanwhile is still refused: moved
// out of BACKING (the handle follows it) ESTALE, replaced by a symlink
// (the name leads there) PATH_ESCAPE.
func TestIdleDirFdsBounded(t *testing.T) {
	for _, byName := range []bool{false, true} {
		t.Run(fmt.Sprintf("byName=%v", byName), func(t *testing.T) {
			tf := newTestFS(t, nil)
			tf.dirs.SetBound(2)
			if byName {
				tf.dirs.ByNameOnly()
			}
			const n = 6
			nodes := make([]*Node, n)
			for i := range n {
				name := fmt.Sprintf("d%d", i)
				if err := os.Mkdir(filepath.Join(tf.backing, name), 0o755); err != nil {
					t.Fatal(err)
				}
				tf.write(t, filepath.Join(name, "f"), "x")
				nodes[i] = tf.lookup(t, name)
			}
			ctx := callerCtx(1)
			var out fuse.EntryOut
			for _, d := range nodes {
				if _, errno := d.Lookup(ctx, "f", &out); errno != 0 {
					t.Fatalf("lookup f: %v", errno)
				}
			}
			if got := tf.dirs.Idle(); got != 2 {
				t.Errorf("%d idle directory fds after using %d directories, want the bound 2", got, n)
			}
			if fd := tf.dirs.Pin(&nodes[0].dcache); fd >= 0 {
				t.Fatalf("d0, the least recently used, still has its fd %d", fd)
			}
			if _, errno := nodes[0].Lookup(ctx, "f", &out); errno != 0 {
				t.Errorf("lookup d0/f after d0's fd was closed: %v", errno)
			}
			// d1 and d2 are closed now; swap them behind the mount.
			outside := filepath.Join(t.TempDir(), "d1")
			if err := os.Rename(filepath.Join(tf.backing, "d1"), outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(tf.backing, "d2"), filepath.Join(tf.backing, "d2.old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(tf.backing, "d2")); err != nil {
				t.Fatal(err)
			}
			want1 := syscall.ESTALE // the handle finds d1 outside
			if byName {
				want1 = syscall.ENOENT // no d1 by that name
			}
			if _, errno := nodes[1].Lookup(ctx, "f", &out); errno != want1 {
				t.Errorf("lookup d1/f with d1 moved out: %v, want %v", errno, want1)
			}
			want2 := syscall.Errno(0) // the handle finds d2 at its new name, as an fd would
			if byName {
				want2 = syscall.EACCES // d2 is a symlink now: PATH_ESCAPE
			}
			if _, errno := nodes[2].Lookup(ctx, "f", &out); errno != want2 {
				t.Errorf("lookup d2/f with d2 replaced by a symlink: %v, want %v", errno, want2)
			}
			if byName {
				tf.wantAudit(t, "opendir PATH_ESCAPE EACCES")
			} else {
				tf.wantAudit(t, "opendir PATH_ESCAPE ESTALE")
			}
			for _, d := range nodes {
				d.OnForget()
			}
			if got := tf.dirs.Idle(); got != 0 {
				t.Errorf("%d idle fds after every node was forgotten", got)
			}
		})
	}
}

func callerCtx(pid uint32) context.Context {
	return &fuse.Context{Caller: fuse.Caller{Pid: pid}}
}

// TestDirectoryMovedOut: a directory node whose fd was opened while it was
// in BACKING is ESTALE, audited PATH_ESCAPE, once the host has moved it
// out, and the mount's again once moved back.
func TestDirectoryMovedOut(t *testing.T) {
	tf := newTestFS(t, nil)
	if err := os.MkdirAll(filepath.Join(tf.backing, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tf.write(t, "d/f", "inside")
	d := tf.lookup(t, "d")
	ctx := callerCtx(1)
	var out fuse.EntryOut
	if _, errno := d.Lookup(ctx, "f", &out); errno != 0 {
		t.Fatalf("lookup d/f: %v", errno)
	}
	outside := filepath.Join(t.TempDir(), "d")
	if err := os.Rename(filepath.Join(tf.backing, "d"), outside); err != nil {
		t.Fatal(err)
	}
	if _, errno := d.Lookup(ctx, "f", &out); errno != syscall.ESTALE {
		t.Errorf("lookup d/f with d moved out: %v, want ESTALE", errno)
	}
	if _, _, _, errno := d.Create(ctx, "g", uint32(os.O_WRONLY|os.O_CREATE), 0o644, &out); errno != syscall.ESTALE {
		t.Errorf("create d/g with d moved out: %v, want ESTALE", errno)
	}
	if _, err := os.Lstat(filepath.Join(outside, "g")); !os.IsNotExist(err) {
		t.Errorf("d/g was made outside BACKING: %v", err)
	}
	tf.wantAudit(t, "opendir PATH_ESCAPE ESTALE", "opendir PATH_ESCAPE ESTALE")
	if err := os.Rename(outside, filepath.Join(tf.backing, "d")); err != nil {
		t.Fatal(err)
	}
	if _, errno := d.Lookup(ctx, "f", &out); errno != 0 {
		t.Errorf("lookup d/f with d moved back: %v", errno)
	}
}
