// Package diskroom keeps a root daemon's writes out of the blocks its
// file system keeps for root.
//
// ext4 keeps a share of its blocks (5 % by default, `tune2fs -m`) for
// processes whose fsuid is the file system's reserved uid (0 unless set)
// or that hold CAP_SYS_RESOURCE, so that root's services on the host can
// still log and work when users have filled the disk. The daemon writes
// every owner's bytes as root: without a check, an agent writing through
// the mount would fill the host's disk past what the kernel leaves any
// unprivileged process, into root's reserve. So every write the daemon
// makes for an owner first takes its size from a Gauge of what the file
// system leaves an unprivileged writer (statfs's f_bavail), and past it
// the write is ENOSPC, as the kernel answers that writer.
//
// The gauge asks statfs(2) again when its estimate falls below a margin,
// when it is older than a second, and after a refusal; in between it
// only subtracts what it allowed. Far from full, a write so costs an
// atomic add; near full, one fstatfs. It counts every byte written as a
// new block, which overcounts a rewrite of allocated blocks: near full,
// such a write is refused where the kernel would have taken it.
//
// Inodes: ext4 keeps none for root, so an owner making files through the
// mount could take the file system's last inode, and every service of
// the host that makes a file would fail. The gauge keeps a reserve of its
// own (InodeReserve: 1 % of the inodes, at least 1000, at most 5 %): a
// file made for an owner (TakeFile) is ENOSPC once statfs's f_ffree is at
// the reserve, and so is a write (Take) once f_ffree is below it, as the
// write engine's every write goes to a temp of its own, a new inode (the
// write refused, its temp goes). The inodes are estimated as the bytes
// are (asked again below a margin, after a second, after a refusal). A
// file system that reports no inode count (btrfs: f_files 0) makes them
// as it has room, and is not gauged by inode.
//
// Blocks beside writes: a file made for an owner takes a block of the
// room too (TakeFile: a directory's first block, a long symlink's
// target), and an extended attribute its size (fusefs: Setxattr), all
// allocated by the daemon as root.
package diskroom

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

const (
	// margin: below it, every write asks the file system, so that the
	// estimate never lets the writes in flight pass f_bavail by more
	// than one write each.
	margin = 64 << 20
	// maxAge: an estimate older than this is asked again, so that what
	// the host wrote or freed meanwhile counts.
	maxAge = time.Second
	// fileMargin: below it, every file made asks the file system.
	fileMargin = 1024
	// The inode reserve (InodeReserve): minReserve inodes, 1/reserveShare
	// of them; never more than 1/maxReserveShare (a small file system).
	minReserve      = 1000
	reserveShare    = 100
	maxReserveShare = 20
)

// InodeReserve is how many of a file system's inodes (f_files) the gauge
// keeps from the owners: 1 %, at least 1000 (what the host's services
// need to log and work, as root's blocks are for), but never more than
// 5 % (ext4's default share of blocks for root), which on a small file
// system is less than 1000.
func InodeReserve(files uint64) int64 {
	f := int64(min(files, math.MaxInt64/2))
	return max(f/reserveShare, min(minReserve, f/maxReserveShare))
}

// inodesLeft is how many inodes st leaves an owner above the reserve
// (negative: within it); a file system that reports no inodes leaves as
// many as anyone asks.
func inodesLeft(st *unix.Statfs_t) int64 {
	if st.Files == 0 {
		return math.MaxInt64 / 2
	}
	return int64(min(st.Ffree, math.MaxInt64/2)) - InodeReserve(st.Files)
}

// Gauge is the room an unprivileged writer has on one file system.
type Gauge struct {
	statfs func(*unix.Statfs_t) error
	now    func() time.Time

	room    atomic.Int64 // bytes the estimate leaves
	inodes  atomic.Int64 // inodes it leaves above the reserve
	checked atomic.Int64 // when statfs last answered, UnixNano; 0: never

	refused atomic.Bool  // the last answer was a refusal: the next is no new burst
	block   atomic.Int64 // the file system's block size, from statfs (TakeFile)
}

// New returns the gauge of the file system that statfs reports on (an
// fstatfs of the backing root, say).
func New(statfs func(*unix.Statfs_t) error) *Gauge {
	g := &Gauge{statfs: statfs, now: time.Now}
	g.block.Store(4096)
	return g
}

// Take takes n bytes from the room: 0 if they fit, else ENOSPC, with
// first true on the first refusal since the last write that fit (one
// audit line per burst of refusals). A write is ENOSPC too while the free
// inodes are below the reserve (its temp took one of them). A statfs that
// fails, or reports no blocks at all (a network or synthetic file system
// that does not know its size), lets the write through: the kernel still
// answers it.
func (g *Gauge) Take(n int64) (errno syscall.Errno, first bool) {
	if n <= 0 {
		return 0, false
	}
	return g.take(n, 0)
}

// TakeFile takes an inode for a file (or directory, node, symlink) an
// owner makes, and a block of room: 0 while the free inodes are above the
// reserve and a block is left, else ENOSPC, first as Take says. The block
// is what a directory takes at once (and a symlink's long target, a
// directory's next entries): made as root, 7,762 directories took a 32
// MiB ext4 image's last unprivileged blocks and went on into root's
// reserve until the inodes ran out (TestRootReserveKeptFromNames). An
// empty file takes none, so the room is undercounted by a block a file
// until the next statfs: near full, such a create is refused where the
// kernel would have taken it.
func (g *Gauge) TakeFile() (errno syscall.Errno, first bool) { return g.take(g.block.Load(), 1) }

// TakeName takes a block of room for a name an owner adds to a directory
// without making an object (a hard link): a directory's entries fill
// blocks the daemon allocates as root. ENOSPC with less than a block
// left, first as Take says.
func (g *Gauge) TakeName() (errno syscall.Errno, first bool) { return g.take(g.block.Load(), 0) }

// take takes n bytes and files inodes.
func (g *Gauge) take(n, files int64) (errno syscall.Errno, first bool) {
	room, inodes := g.room.Add(-n), g.inodes.Add(-files)
	if room >= margin && inodes >= fileMargin && g.now().UnixNano()-g.checked.Load() < int64(maxAge) {
		return 0, false
	}
	// Writers that meet here together each ask: statfs is cheap, and
	// the last answer stored is as good as any.
	var st unix.Statfs_t
	if err := g.statfs(&st); err != nil || st.Blocks == 0 {
		return 0, false // no answer, or a file system that reports no size
	}
	left, ileft := int64(st.Bavail)*st.Bsize, inodesLeft(&st)
	if st.Bsize > 0 {
		g.block.Store(st.Bsize)
	}
	if left < n || ileft < files {
		g.room.Store(left)
		g.inodes.Store(ileft)
		g.checked.Store(g.now().UnixNano())
		return syscall.ENOSPC, !g.refused.Swap(true)
	}
	// The writes in flight since the Add above took their share from the
	// old estimate; the fresh one counts them in statfs's answer or not
	// at all, so it starts from what statfs says less this write.
	g.room.Store(left - n)
	g.inodes.Store(ileft - files)
	g.checked.Store(g.now().UnixNano())
	g.refused.Store(false)
	return 0, false
}

// ForRoot returns the gauge of the file system holding the object fd
// holds, for a daemon that is root (root); nil for one that is not, whose
// writes the kernel holds to the room itself.
func ForRoot(fd int, root bool) *Gauge {
	if !root {
		return nil
	}
	return New(func(st *unix.Statfs_t) error { return dirfd.Fstatfs(fd, st) })
}

// KeepsReserve reports whether the file system holding the object fd
// holds keeps blocks that only root may write: ext4's reserve
// (mkfs.ext4 -m, tune2fs -m). A write the kernel passes through to a
// backing file is made with the credentials the daemon registered the
// file with, fsuid 0, and is not taken from a gauge: on such a file
// system it could fill the reserve, so the mount passes through no write
// there (fusefs: FS.passCoord). statfs's f_bfree past f_bavail is the
// reserve and, on ext4, the clusters it keeps for its own use
// (/sys/fs/ext4/DEV/reserved_clusters), which root cannot write either;
// what is past both is root's. A file system that says nothing more is
// taken to keep a reserve if f_bfree passes f_bavail at all.
func KeepsReserve(fd int) (bool, error) {
	var st unix.Statfs_t
	if err := dirfd.Fstatfs(fd, &st); err != nil {
		return true, err
	}
	if st.Bfree <= st.Bavail {
		return false, nil
	}
	gap := st.Bfree - st.Bavail
	if st.Type != unix.EXT4_SUPER_MAGIC {
		return true, nil
	}
	var obj unix.Stat_t
	if err := dirfd.Fstat(fd, &obj); err != nil {
		return true, err
	}
	own, err := ext4ReservedClusters(obj.Dev)
	if err != nil {
		return true, err
	}
	return gap > own, nil
}

// ext4ReservedClusters is what the ext4 file system on device dev keeps
// for its own use (s_resv_clusters), in clusters: blocks, unless it was
// made with bigalloc (then fewer than its blocks: the reserve is
// overcounted, never missed).
func ext4ReservedClusters(dev uint64) (uint64, error) {
	v, err := Ext4Attr(unix.Major(dev), unix.Minor(dev), "reserved_clusters")
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(v, 10, 64)
}

// Ext4Attr reads attribute attr of the ext4 file system on block device
// major:minor from /sys/fs/ext4/DEV/ (DEV: the device's name, from
// /sys/dev/block/MAJ:MIN), spaces trimmed.
func Ext4Attr(major, minor uint32, attr string) (string, error) {
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/ext4", filepath.Base(link), attr))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
