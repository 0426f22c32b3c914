package kernelcache

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

func TestInEffect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		watched bool
		set     *Timeouts
		want    Timeouts
	}{
		{"unwatched", false, nil, Default},
		{"watched", true, nil, Watched},
		{"every field set", true, &Timeouts{Entry: 2, Attr: 3, Negative: 4}, Timeouts{Entry: 2, Attr: 3, Negative: 4}},
		{"negatives keep the default", false, &Timeouts{Entry: -1, Attr: 0, Negative: -1}, Timeouts{Entry: time.Second}},
	} {
		if got := InEffect(tc.watched, tc.set); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestCapabilities: the kernel is never offered to skip OPEN or OPENDIR
// (every open reaches the guard), and passthrough only where asked.
func TestCapabilities(t *testing.T) {
	for _, pt := range []bool{false, true} {
		mo := Capabilities(fuse.MountOptions{}, pt)
		if mo.DisabledCapabilities&(fuse.CAP_NO_OPEN_SUPPORT|fuse.CAP_NO_OPENDIR_SUPPORT) != fuse.CAP_NO_OPEN_SUPPORT|fuse.CAP_NO_OPENDIR_SUPPORT {
			t.Errorf("passthrough %v: the kernel may skip OPEN or OPENDIR", pt)
		}
		if (mo.DisabledCapabilities&fuse.CAP_PASSTHROUGH != 0) == pt {
			t.Errorf("passthrough %v: disabled capabilities %#x", pt, mo.DisabledCapabilities)
		}
		if !mo.EnableLocks || !mo.EnableAcl || mo.MaxWrite != 1<<20 {
			t.Errorf("passthrough %v: %+v", pt, mo)
		}
	}
}
