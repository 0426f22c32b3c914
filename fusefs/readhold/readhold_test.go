package readhold

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// seekable is the method go-fuse's splice takes a read's fd from
// (fuse/splice_linux.go, trySplice: any ReadResult with it is spliced).
type seekable interface {
	Seekable() (fd uintptr, off int64, sz int)
}

// TestGoFuseSplicesSeekable: a read answered with an fd keeps its
// zero-copy splice only while go-fuse's own fd result is what it looks for
// under this method; if go-fuse renamed it, heldRead would silently fall
// back to a pread into the daemon.
func TestGoFuseSplicesSeekable(t *testing.T) {
	if _, ok := fuse.ReadResultFd(0, 0, 1).(seekable); !ok {
		t.Fatal("go-fuse's ReadResultFd has no Seekable method: heldRead must follow its new name")
	}
	if _, ok := any(&heldRead{}).(seekable); !ok {
		t.Fatal("heldRead is not seekable: go-fuse would not splice it")
	}
}
