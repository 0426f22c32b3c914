package logsync

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFlushesCover: ext4 says its fsyncs flush; tmpfs does not (it has no
// device to flush).
func TestFlushesCover(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		want := st.Type == unix.EXT4_SUPER_MAGIC
		if got := FlushesCover(fd); got != want {
			t.Errorf("FlushesCover(%s, f_type %#x) = %v, want %v", dir, st.Type, got, want)
		}
		unix.Close(fd)
	}
}

// TestThrough: an intent is written through where every one is
// (Ordered), or where fsyncs flush (Covers) for the making of an empty
// object that keeps no link; else flushed.
func TestThrough(t *testing.T) {
	for _, tc := range []struct {
		p          Policy
		makesEmpty bool
		gen        uint64
		want       bool
	}{
		{Policy{}, true, 0, false},
		{Policy{Covers: true}, true, 0, true},
		{Policy{Covers: true}, true, 3, false},
		{Policy{Covers: true}, false, 0, false},
		{Policy{Covers: true, Ordered: true}, false, 3, true},
		{Policy{Ordered: true}, false, 0, true},
	} {
		if got := tc.p.Through(tc.makesEmpty, tc.gen); got != tc.want {
			t.Errorf("%+v.Through(%v, %d) = %v, want %v", tc.p, tc.makesEmpty, tc.gen, got, tc.want)
		}
	}
}

// TestRoundNothingToWrite: a round with no log to write (fd -1) makes no
// call on it, flushing or not.
func TestRoundNothingToWrite(t *testing.T) {
	for _, flush := range []bool{false, true} {
		if err := (Policy{Covers: true}).Round(flush, false, -1, -1); err != nil {
			t.Errorf("Round(flush %v) of nothing: %v", flush, err)
		}
	}
}
