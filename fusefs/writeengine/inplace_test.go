package writeengine

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
)

// TestInPlace: a coordinated file is written in place through its own
// descriptor; a read-only open changes nothing (EBADF); a file the mount
// made has each change run as the mount's own (Host.OwnMadeChange).
func TestInPlace(t *testing.T) {
	d := newEngineDir(t, "0123456789")
	fd, err := dirfd.Open(d.dfd, "f", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(fd)
	ro := d.g.OpenInPlace(fd, false, false, "f")
	if _, errno := ro.Write(context.Background(), []byte("x"), 0); errno != syscall.EBADF {
		t.Errorf("write through a read-only open = %v, want EBADF", errno)
	}
	if errno := ro.Truncate(0); errno != syscall.EBADF {
		t.Errorf("truncate through a read-only open = %v, want EBADF", errno)
	}
	rw, err := dirfd.Reopen(fd, unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(rw)
	p := d.g.OpenInPlace(rw, true, true, "f")
	if n, errno := p.Write(context.Background(), []byte("ab"), 2); errno != 0 || n != 2 {
		t.Fatalf("write = %d, %v", n, errno)
	}
	d.want(t, "f", "01ab456789", "right after the write")
	if errno := p.Truncate(6); errno != 0 {
		t.Fatalf("truncate = %v", errno)
	}
	if n, errno := p.CopyIn(context.Background(), fd, 0, 6, 2, 0); errno != 0 || n != 2 {
		t.Fatalf("copy = %d, %v", n, errno)
	}
	if errno := p.Allocate(context.Background(), 0, 16, 0); errno != 0 {
		t.Fatalf("allocate = %v", errno)
	}
	for _, dataOnly := range []bool{false, true} {
		if errno := p.Fsync(dataOnly); errno != 0 {
			t.Errorf("fsync (data only %v) = %v", dataOnly, errno)
		}
	}
	d.want(t, "f", "01ab4501"+strings.Repeat("\x00", 8), "after the changes")
	if d.host.made != 4 {
		t.Errorf("%d changes as the mount's own, want 4", d.host.made)
	}
}

// TestInPlaceFullDisk: on a file system with no room left, a write
// through a read-only open is EBADF, as ever, and takes no room (no
// RESOURCE_LIMIT audited for what was never a write); a write through a
// writable one is ENOSPC, audited once, the file unchanged.
func TestInPlaceFullDisk(t *testing.T) {
	d := newEngineDir(t, "0123456789")
	d.g.cfg.Room = diskroom.New(func(st *unix.Statfs_t) error {
		*st = unix.Statfs_t{Blocks: 1024, Bavail: 0, Bsize: 4096}
		return nil
	})
	fd, err := dirfd.Open(d.dfd, "f", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(fd)
	ro := d.g.OpenInPlace(fd, false, false, "f")
	ctx := context.Background()
	if _, errno := ro.Write(ctx, []byte("x"), 0); errno != syscall.EBADF {
		t.Errorf("write through a read-only open = %v, want EBADF", errno)
	}
	if errno := ro.Allocate(ctx, 0, 4096, 0); errno != syscall.EBADF {
		t.Errorf("fallocate through a read-only open = %v, want EBADF", errno)
	}
	if len(d.host.audits) != 0 {
		t.Errorf("audited %q for writes a read-only open never made", d.host.audits)
	}
	rw, err := dirfd.Reopen(fd, unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(rw)
	p := d.g.OpenInPlace(rw, true, false, "f")
	for range 2 {
		if _, errno := p.Write(ctx, []byte("ab"), 2); errno != syscall.ENOSPC {
			t.Errorf("write with no room = %v, want ENOSPC", errno)
		}
	}
	if want := []string{"write RESOURCE_LIMIT"}; fmt.Sprint(d.host.audits) != fmt.Sprint(want) {
		t.Errorf("audited %q, want %q", d.host.audits, want)
	}
	d.want(t, "f", "0123456789", "after the refused writes")
}
