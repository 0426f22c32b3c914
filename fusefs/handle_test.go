package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
)

// TestOnlyPassthroughFilePassesThrough: go-fuse hands the kernel a backing
// file for any handle that implements fs.FilePassthroughFder, and then
// every later open of the inode with it; a write handle given one would
// write into the file in place, past the temp. Neither handle type may
// implement it: only passthroughFile, the wrapper newReader chooses.
func TestOnlyPassthroughFilePassesThrough(t *testing.T) {
	for _, h := range []fs.FileHandle{&readHandle{}, &writeHandle{}} {
		if _, ok := h.(fs.FilePassthroughFder); ok {
			t.Errorf("%T implements fs.FilePassthroughFder", h)
		}
	}
}
