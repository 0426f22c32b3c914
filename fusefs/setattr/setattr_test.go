package setattr

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

func TestApply(t *testing.T) {
	when := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		name  string
		in    fuse.SetAttrIn
		check func(t *testing.T, st *unix.Stat_t)
	}{
		{"mode", fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o100640}}, func(t *testing.T, st *unix.Stat_t) {
			if st.Mode&07777 != 0o640 {
				t.Errorf("mode %o, want 640", st.Mode&07777)
			}
		}},
		{"mtime alone", fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MTIME, Mtime: uint64(when.Unix()), Mtimensec: 6}}, func(t *testing.T, st *unix.Stat_t) {
			if st.Mtim.Sec != when.Unix() || st.Mtim.Nsec != 6 {
				t.Errorf("mtime %v, want %v", st.Mtim, when)
			}
			if st.Atim.Sec == when.Unix() {
				t.Error("the atime was set too")
			}
		}},
		{"atime now", fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_ATIME | fuse.FATTR_ATIME_NOW}}, func(t *testing.T, st *unix.Stat_t) {
			if time.Since(time.Unix(st.Atim.Unix())) > time.Hour {
				t.Errorf("atime %v is not now", st.Atim)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(p, time.Unix(0, 0), time.Unix(0, 0))
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if errno := Apply(fd, &tc.in); errno != 0 {
				t.Fatalf("Apply: %v", errno)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				t.Fatal(err)
			}
			tc.check(t, &st)
		})
	}
}
