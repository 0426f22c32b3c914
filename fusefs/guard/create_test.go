package guard

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMknodMode: fifos, sockets and regular files are made (type 0 is a
// regular file); device nodes are refused.
func TestMknodMode(t *testing.T) {
	for _, c := range []struct {
		mode, want uint32
		ok         bool
	}{
		{syscall.S_IFIFO | 0644, syscall.S_IFIFO | 0644, true},
		{syscall.S_IFSOCK | 0600, syscall.S_IFSOCK | 0600, true},
		{syscall.S_IFREG | 0600, syscall.S_IFREG | 0600, true},
		{0640, syscall.S_IFREG | 0640, true},
		{syscall.S_IFCHR | 0600, syscall.S_IFCHR | 0600, false},
		{syscall.S_IFBLK | 0600, syscall.S_IFBLK | 0600, false},
		{syscall.S_IFDIR | 0755, syscall.S_IFDIR | 0755, false},
	} {
		if got, ok := MknodMode(c.mode); got != c.want || ok != c.ok {
			t.Errorf("%o: %o %v; want %o %v", c.mode, got, ok, c.want, c.ok)
		}
	}
}

// TestFirstMode: an object handed over is made with no permission bits,
// a symlink always with its own.
func TestFirstMode(t *testing.T) {
	for _, c := range []struct {
		mode     uint32
		handOver bool
		want     uint32
	}{
		{syscall.S_IFDIR | 02755, false, 02755},
		{syscall.S_IFDIR | 02755, true, 0},
		{syscall.S_IFIFO | 0644, true, 0},
		{syscall.S_IFLNK | 0777, true, 0777},
		{syscall.S_IFLNK | 0777, false, 0777},
	} {
		if got := FirstMode(c.mode, c.handOver); got != c.want {
			t.Errorf("%o, hand over %v: %o; want %o", c.mode, c.handOver, got, c.want)
		}
	}
}

// TestMadeByCall: what the name leads to after the call is the object
// made when it has the type asked, and, handed over, no permission bits
// (but a directory's inherited set-group-ID bit) and the daemon's owner.
func TestMadeByCall(t *testing.T) {
	const euid = 0
	st := func(mode, uid uint32) *unix.Stat_t { return &unix.Stat_t{Mode: mode, Uid: uid} }
	for _, c := range []struct {
		name      string
		st        *unix.Stat_t
		mode      uint32
		handOver  bool
		inherited uint32
		ok        bool
	}{
		{"a directory", st(syscall.S_IFDIR, euid), syscall.S_IFDIR | 0755, true, 0, true},
		{"in a set-group-ID directory", st(syscall.S_IFDIR|syscall.S_ISGID, euid), syscall.S_IFDIR | 0755, true, syscall.S_ISGID, true},
		{"another type", st(syscall.S_IFREG, euid), syscall.S_IFDIR | 0755, true, 0, false},
		{"another type, not handed over", st(syscall.S_IFLNK|0777, 1000), syscall.S_IFIFO | 0644, false, 0, false},
		{"with permission bits", st(syscall.S_IFIFO|0644, euid), syscall.S_IFIFO | 0644, true, 0, false},
		{"another owner", st(syscall.S_IFIFO, 1000), syscall.S_IFIFO | 0644, true, 0, false},
		{"not handed over", st(syscall.S_IFIFO|0644, 1000), syscall.S_IFIFO | 0644, false, 0, true},
		{"a set-group-ID file is no directory", st(syscall.S_IFIFO|syscall.S_ISGID, euid), syscall.S_IFIFO | 0644, true, 0, false},
		{"a symlink", st(syscall.S_IFLNK|0777, euid), syscall.S_IFLNK | 0777, true, 0, true},
		{"a symlink of another owner", st(syscall.S_IFLNK|0777, 1000), syscall.S_IFLNK | 0777, true, 0, true},
	} {
		if inherited, ok := MadeByCall(c.st, c.mode, c.handOver, euid); inherited != c.inherited || ok != c.ok {
			t.Errorf("%s: %o %v; want %o %v", c.name, inherited, ok, c.inherited, c.ok)
		}
	}
}

// TestOwner: root in group 0 claims nothing, and a set-group-ID directory
// keeps its group; a root caller's object is not handed over.
func TestOwner(t *testing.T) {
	if Claims(0, 0) || !Claims(0, 100) || !Claims(1000, 0) {
		t.Error("Claims: root in group 0 claims nothing; any other caller claims")
	}
	if uid, gid := NewOwner(1000, 100, false); uid != 1000 || gid != 100 {
		t.Errorf("NewOwner: %d:%d; want 1000:100", uid, gid)
	}
	if uid, gid := NewOwner(1000, 100, true); uid != 1000 || gid != -1 {
		t.Errorf("NewOwner in a set-group-ID directory: %d:%d; want 1000:-1", uid, gid)
	}
	if HandsOver(false, 1000) || HandsOver(true, 0) || !HandsOver(true, 1000) {
		t.Error("HandsOver: only with chown, and only to a caller not root")
	}
}
