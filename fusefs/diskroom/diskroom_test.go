package diskroom

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeFS answers statfs with avail bytes in 4 KiB blocks and counts the
// calls.
type fakeFS struct {
	avail int64
	err   error
	calls int
}

func (f *fakeFS) statfs(st *unix.Statfs_t) error {
	f.calls++
	if f.err != nil {
		return f.err
	}
	*st = unix.Statfs_t{Bsize: 4096, Blocks: 1 << 20, Bavail: uint64(f.avail / 4096)}
	return nil
}

func TestTake(t *testing.T) {
	type step struct {
		avail   int64         // what statfs reports from this step on (-1: unchanged)
		advance time.Duration // the clock moves before the take
		n       int64
		errno   syscall.Errno
		first   bool
		calls   int // statfs calls so far
	}
	const mib = 1 << 20
	tests := []struct {
		name  string
		steps []step
	}{
		{"far from full: one statfs, then arithmetic", []step{
			{avail: 1 << 30, n: 4096, calls: 1},
			{avail: -1, n: 4096, calls: 1},
			{avail: -1, n: 100 * mib, calls: 1},
		}},
		{"an old estimate is asked again", []step{
			{avail: 1 << 30, n: 4096, calls: 1},
			{avail: -1, advance: 2 * time.Second, n: 4096, calls: 2},
		}},
		{"the estimate below the margin asks every time", []step{
			{avail: 1 << 30, n: 1<<30 - 65*mib, calls: 1},
			{avail: 65 * mib, n: 2 * mib, calls: 2},
			{avail: 63 * mib, n: 4096, calls: 3},
		}},
		{"past f_bavail: ENOSPC, audited once per burst", []step{
			{avail: 8192, n: 4096, calls: 1},
			{avail: 4096, n: 8192, errno: syscall.ENOSPC, first: true, calls: 2},
			{avail: -1, n: 8192, errno: syscall.ENOSPC, calls: 3},
			{avail: -1, n: 4096, calls: 4},
			{avail: 0, n: 1, errno: syscall.ENOSPC, first: true, calls: 5},
		}},
		{"nothing to take asks nothing", []step{
			{avail: 0, n: 0, calls: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &fakeFS{}
			clock := time.Unix(1000, 0)
			g := New(fs.statfs)
			g.now = func() time.Time { return clock }
			for i, s := range tt.steps {
				if s.avail >= 0 {
					fs.avail = s.avail
				}
				clock = clock.Add(s.advance)
				errno, first := g.Take(s.n)
				if errno != s.errno || first != s.first || fs.calls != s.calls {
					t.Fatalf("step %d: Take(%d) = %v, first %v after %d statfs; want %v, %v after %d",
						i, s.n, errno, first, fs.calls, s.errno, s.first, s.calls)
				}
			}
		})
	}
}

// TestTakeUnknown lets the write through where statfs fails or reports
// no size: the kernel still answers it.
func TestTakeUnknown(t *testing.T) {
	fails := &fakeFS{err: errors.New("EIO")}
	if errno, _ := New(fails.statfs).Take(4096); errno != 0 {
		t.Fatalf("Take with statfs failing = %v, want 0", errno)
	}
	sizeless := New(func(st *unix.Statfs_t) error { *st = unix.Statfs_t{Bsize: 4096}; return nil })
	if errno, _ := sizeless.Take(4096); errno != 0 {
		t.Fatalf("Take on a file system of no blocks = %v, want 0", errno)
	}
}

// inodeFS answers statfs with room enough for bytes and ffree of files
// inodes free.
type inodeFS struct {
	files, ffree uint64
	calls        int
}

func (f *inodeFS) statfs(st *unix.Statfs_t) error {
	f.calls++
	*st = unix.Statfs_t{Bsize: 4096, Blocks: 1 << 20, Bavail: 1 << 19, Files: f.files, Ffree: f.ffree}
	return nil
}

func TestInodeReserve(t *testing.T) {
	for _, tt := range []struct {
		files uint64
		want  int64
	}{
		{0, 0},
		{2048, 102},              // a small file system: 5 %, less than 1000
		{65536, 1000},            // 1000, more than 1 %
		{6553600, 65536},         // 1 %
		{1 << 62, 1 << 62 / 100}, // XFS's answers: no overflow
	} {
		if got := InodeReserve(tt.files); got != tt.want {
			t.Errorf("InodeReserve(%d) = %d, want %d", tt.files, got, tt.want)
		}
	}
}

// TestTakeFile: the files an owner makes take inodes down to the reserve,
// not into it; a write is refused while the free inodes are below it;
// what the host frees is found again.
func TestTakeFile(t *testing.T) {
	fs := &inodeFS{files: 2048, ffree: 102 + 3}
	clock := time.Unix(1000, 0)
	g := New(fs.statfs)
	g.now = func() time.Time { return clock }
	for i := 0; i < 3; i++ {
		if errno, _ := g.TakeFile(); errno != 0 {
			t.Fatalf("file %d, above the reserve: %v", i, errno)
		}
		fs.ffree--
	}
	errno, first := g.TakeFile()
	if errno != syscall.ENOSPC || !first {
		t.Fatalf("a file into the reserve: %v, first %v; want ENOSPC, first", errno, first)
	}
	if errno, _ := g.Take(4096); errno != 0 {
		t.Fatalf("a write with the free inodes at the reserve: %v", errno)
	}
	fs.ffree-- // made by root, into the reserve
	if errno, _ := g.Take(4096); errno != syscall.ENOSPC {
		t.Fatalf("a write with the free inodes below the reserve: %v, want ENOSPC", errno)
	}
	fs.ffree += 1000 // the host freed some
	if errno, _ := g.TakeFile(); errno != 0 {
		t.Fatalf("a file after the host freed inodes: %v", errno)
	}
	calls := fs.calls
	if errno, _ := g.TakeFile(); errno != 0 || fs.calls != calls+1 {
		t.Errorf("below the margin a file asks statfs again: %v, %d calls, want %d", errno, fs.calls, calls+1)
	}
	fs.ffree = 1 << 20
	clock = clock.Add(2 * time.Second)
	g.TakeFile()
	calls = fs.calls
	if errno, _ := g.TakeFile(); errno != 0 || fs.calls != calls {
		t.Errorf("far from the reserve a file is arithmetic: %v, %d calls, want %d", errno, fs.calls, calls)
	}
}

// TestTakeFileNoInodeCount: a file system that reports no inode count
// (btrfs) is not gauged by inode.
func TestTakeFileNoInodeCount(t *testing.T) {
	g := New((&inodeFS{}).statfs)
	for i := 0; i < 3000; i++ {
		if errno, _ := g.TakeFile(); errno != 0 {
			t.Fatalf("file %d: %v", i, errno)
		}
	}
}

// TestTakeFileTakesABlock: a file an owner makes takes a block of room
// as well as an inode (a directory's first block, as root, would come out
// of root's reserve): with less than a block left it is ENOSPC, with one
// block left one file is made and the next refused.
func TestTakeFileTakesABlock(t *testing.T) {
	for _, tc := range []struct {
		avail int64
		made  int
	}{
		{0, 0},
		{4095, 0},
		{4096, 1},
		{3 * 4096, 3},
	} {
		fs := &fakeFS{avail: tc.avail}
		g := New(fs.statfs)
		made := 0
		for made < 10 {
			if errno, _ := g.TakeFile(); errno != 0 {
				if errno != syscall.ENOSPC {
					t.Fatalf("avail %d: %v, want ENOSPC", tc.avail, errno)
				}
				break
			}
			fs.avail -= 4096 // the file's block, as the file system counts it
			made++
		}
		if made != tc.made {
			t.Errorf("avail %d bytes: %d files made, want %d", tc.avail, made, tc.made)
		}
	}
}
