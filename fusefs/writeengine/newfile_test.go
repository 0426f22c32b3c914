package writeengine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
)

// create makes name for owner as the mount's CREATE does: the temp alone,
// locked, and the write's first handle over it (OpenNew).
func (d *engineDir) create(t *testing.T, owner locks.Owner, name string) *File[*fakeNode] {
	t.Helper()
	temp := d.g.NewTempName()
	fd, err := dirfd.Open(d.dfd, temp, unix.O_RDWR|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	lease, err := d.g.table.AcquireMode(locks.KeyOf(&st), owner, locks.Write)
	if err != nil {
		t.Fatal(err)
	}
	e := lease.Shared()
	e.Lock()
	defer e.Unlock()
	f, err := d.g.OpenNew(context.Background(), e, lease, owner, &fakeNode{name}, 1, &fakeNode{"."}, d.dfd, name, temp, fd, &st, unix.O_WRONLY|unix.O_CREAT, 1)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// names lists the directory's entries but f, temps marked.
func (d *engineDir) names(t *testing.T) string {
	t.Helper()
	var out []string
	for _, n := range d.others(t) {
		if strings.HasPrefix(n, TempPrefix) {
			n = "temp"
		}
		out = append(out, n)
	}
	return strings.Join(out, " ")
}

// TestNewFilePublishedAtClose: a created file has no name in BACKING
// until its close publishes its temp there, whole; a close with nothing
// written publishes it empty.
func TestNewFilePublishedAtClose(t *testing.T) {
	for _, data := range []string{"new content", ""} {
		d := newEngineDir(t, "x")
		f := d.create(t, "a", "g")
		if data != "" {
			d.write(t, f, false, data, 0)
		}
		if got := d.names(t); got != "temp" {
			t.Fatalf("before the close the directory holds %q, want the temp alone", got)
		}
		if errno := d.close(f); errno != 0 {
			t.Fatalf("close = %v", errno)
		}
		d.want(t, "g", data, "after the close")
		if got := d.names(t); got != "g" {
			t.Errorf("after the close the directory holds %q, want g alone", got)
		}
		if d.host.published != 1 || d.host.replaced != 0 {
			t.Errorf("published %d, replaced %d; want 1, 0: the temp is the file the node stands for", d.host.published, d.host.replaced)
		}
		if d.host.charged != 0 {
			t.Errorf("%d writes still charged", d.host.charged)
		}
	}
}

// TestNewFileHostMadeName: a name the host made before the publish keeps
// the host's file; the new bytes are kept beside it, and the close says
// EBUSY.
func TestNewFileHostMadeName(t *testing.T) {
	d := newEngineDir(t, "x")
	f := d.create(t, "a", "g")
	d.write(t, f, false, "mount's", 0)
	if err := os.WriteFile(filepath.Join(d.path, "g"), []byte("host's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if errno := d.close(f); errno != syscall.EBUSY {
		t.Fatalf("close = %v, want EBUSY", errno)
	}
	d.want(t, "g", "host's", "after the close")
	var copies int
	for _, n := range d.others(t) {
		if strings.HasPrefix(n, "g.realm-conflict-") {
			copies++
			d.want(t, n, "mount's", "the conflict copy")
		} else if n != "g" {
			t.Errorf("left in the directory: %s", n)
		}
	}
	if copies != 1 {
		t.Errorf("%d conflict copies, want 1", copies)
	}
}

// TestNewFileMadeReal: a contact makes the file real. With a write
// other than an append in its temp, the empty file appears at the name,
// and the write goes on as a rewrite of it (the name shows it empty until
// the close, whole after). With appends alone (or nothing), the temp is
// published as it is, as appends in place would have shown it, and the
// next append goes into the file.
func TestNewFileMadeReal(t *testing.T) {
	for _, tc := range []struct {
		name        string
		appends     bool
		data        string
		atName      string // what the name shows once made real
		names       string // the directory then
		replaced    int
		after, want string // written after, and the file at the close
	}{
		{"nothing written", true, "", "", "g", 0, "more", "more"},
		{"appends alone", true, "first", "first", "g", 0, "+more", "first+more"},
		{"a write at an offset", false, "first", "", "temp g", 1, "second", "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDir(t, "x")
			f := d.create(t, "a", "g")
			if tc.data != "" {
				d.write(t, f, tc.appends, tc.data, 0)
			}
			key := d.g.table.EntryKey(f.lease.Shared())
			if errno := d.g.MakeReal(context.Background(), key, "a"); errno != 0 {
				t.Fatalf("MakeReal = %v", errno)
			}
			d.want(t, "g", tc.atName, "made real")
			if got := d.names(t); got != tc.names {
				t.Errorf("made real: the directory holds %q, want %q", got, tc.names)
			}
			if d.host.replaced != tc.replaced {
				t.Errorf("made real: %d nodes replaced, want %d", d.host.replaced, tc.replaced)
			}
			if errno := d.g.MakeReal(context.Background(), key, "a"); errno != 0 {
				t.Fatalf("MakeReal again = %v", errno)
			}
			d.write(t, f, tc.appends, tc.after, 0)
			if tc.appends {
				d.want(t, "g", tc.want, "an append after it, in place")
			}
			if errno := d.close(f); errno != 0 {
				t.Fatalf("close = %v", errno)
			}
			d.want(t, "g", tc.want, "after the close")
			if got := d.names(t); got != "g" {
				t.Errorf("after the close the directory holds %q, want g alone", got)
			}
		})
	}
}
