package fusefs

import (
	"slices"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestCreatePublishes: a created file has no name in BACKING until its
// commit publishes it, whose durable form fsyncs the temp and the
// directory; except with durability=full on a filesystem that orders
// renamed data, where the create makes the empty file at its name at
// once, as before, and its commit spares the temp's fsync.
func TestCreatePublishes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		durability Durability
		unordered  bool
		early      bool // the name is in BACKING before the commit
		want       []string
	}{
		{"full, renamed data ordered", DurabilityFull, false, true, []string{"dir"}},
		{"full, not ordered", DurabilityFull, true, false, []string{"temp", "dir"}},
		{"atomic", DurabilityAtomic, false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			tf := newTestFS(t, func(o *Options) {
				o.Durability = tc.durability
				o.onSync = func(what string) { got = append(got, what) }
			})
			tf.ordersRenames = !tc.unordered
			var out fuse.EntryOut
			_, fh, _, errno := tf.root.Create(as(1), "c", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644, &out)
			if errno != 0 {
				t.Fatalf("create: %v", errno)
			}
			if _, there := tf.read(t, "c"); there != tc.early {
				t.Errorf("the name in BACKING before the commit: %v, want %v", there, tc.early)
			}
			h := fh.(*writeHandle)
			if n, errno := h.Write(as(1), []byte("new"), 0); errno != 0 || n != 3 {
				t.Fatalf("write: %d, %v", n, errno)
			}
			h.Release(as(1))
			tf.wantContent(t, "c", "new", "after the commit")
			tf.wantNoTemps(t)
			if !slices.Equal(got, tc.want) {
				t.Errorf("fsyncs %q, want %q", got, tc.want)
			}
		})
	}
}
