package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/fdbudget"
	"github.com/realm-dev/realm/locks"
)

func callerCtx(pid uint32) context.Context {
	return &fuse.Context{Caller: fuse.Caller{Pid: pid}}
}

// TestDescriptorBound: an owner holding its bound of handles is refused
// (EMFILE), audited once per burst, while another owner is not; a release
// lets it open again, and its next refusal is a new burst.
func TestDescriptorBound(t *testing.T) {
	tf := newTestFS(t, func(o *Options) { o.MaxFdsPerOwner = 2 })
	a, b := callerCtx(100), callerCtx(200)
	ownerA := locks.Owner("pid:100") // Options.Owners nil: each process owns
	for i := range uint64(2) {
		if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != 0 {
			t.Fatalf("open %d of owner A below its bound: %v", i, errno)
		}
		tf.fds.Opened(fdbudget.Handle{Fh: i}, ownerA)
	}
	for range 3 {
		if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != syscall.EMFILE {
			t.Errorf("owner A past its bound: %v, want EMFILE", errno)
		}
	}
	if errno := tf.admitOpen(b, "", "open", tf.root, "f", 1); errno != 0 {
		t.Errorf("owner B while A is at its bound: %v", errno)
	}
	tf.wantAudit(t, "open RESOURCE_LIMIT EMFILE")
	tf.fds.Released(fdbudget.Handle{Fh: 0})
	tf.fds.Released(fdbudget.Handle{Dir: true, Fh: 1}) // another kind of handle: not A's
	if errno := tf.admitOpen(a, "", "open", tf.root, "f", 1); errno != 0 {
		t.Errorf("owner A after a release: %v", errno)
	}
	tf.fds.Opened(fdbudget.Handle{Fh: 0}, ownerA)
	if errno := tf.admitOpen(a, "", "opendir", tf.root, "", 1); errno != syscall.EMFILE {
		t.Errorf("owner A at its bound again: %v, want EMFILE", errno)
	}
	tf.wantAudit(t, "open RESOURCE_LIMIT EMFILE", "opendir RESOURCE_LIMIT EMFILE")
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
