package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRootReserveKept: the daemon writes as root, and ext4 lets root
// write into the blocks it keeps for root (here half the file system,
// mkfs.ext4 -m 50). Writes through the mount stop where the file system
// stops a writer that is not root: ENOSPC, audited RESOURCE_LIMIT, the
// file rewritten left byte-identical, and root's reserve still free for
// the host, whose own root writes into it.
func TestRootReserveKept(t *testing.T) {
	t.Parallel()
	const old = "the old content\n"
	m, reserve := reserveMount(t, func(m *Mount) { writeFile(t, m.BackingPath("keep"), old) })

	// More than all there is, through the mount, over an existing file.
	f, err := os.OpenFile(m.Path("keep"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	var werr error
	for written := 0; written < 64<<20 && werr == nil; written += len(chunk) {
		_, werr = f.Write(chunk)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 64 MiB into a 32 MiB file system through the mount: %v, want ENOSPC", werr)
	}
	m.WaitAudit("the write past the room of a writer that is not root", func(e auditEntry) bool {
		return e.str("op") == "write" && e.path() == "keep" && e.str("code") == "RESOURCE_LIMIT" && e.errnoIs(syscall.ENOSPC)
	})
	if got := readFile(t, m.BackingPath("keep")); got != old {
		t.Fatalf("keep after the refused rewrite: %d bytes, want %q", len(got), old)
	}

	reserveStillRoots(t, m, reserve)
}

// TestRootReserveKeptCoordinated: a coordinated file (SQLite's, by name)
// is written in place. Passed through, the kernel would write it straight
// to the backing file as the daemon registered it (fsuid 0, which ext4
// lets into root's reserve) and the gauge would never see the writes: so
// where BACKING's file system keeps blocks for root, coordinated files go
// through the daemon, and their writes stop where the others' do.
func TestRootReserveKeptCoordinated(t *testing.T) {
	t.Parallel()
	m, reserve := reserveMount(t, nil)
	if !strings.Contains(readFile(t, m.LogFile), "passthrough=reads ") {
		t.Errorf("the daemon's mounted line does not say passthrough=reads (coordinated files through the daemon):\n%s", m.logTail())
	}
	f, err := os.OpenFile(m.Path("big.db"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	var werr error
	written := 0
	for ; written < 64<<20 && werr == nil; written += len(chunk) {
		_, werr = f.Write(chunk)
	}
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Errorf("writing 64 MiB into a coordinated file on a 32 MiB file system through the mount: %v after %d MiB, want ENOSPC", werr, written>>20)
	}
	m.WaitAudit("the coordinated file's write past the room of a writer that is not root", func(e auditEntry) bool {
		return e.str("code") == "RESOURCE_LIMIT" && e.path() == "big.db" && e.errnoIs(syscall.ENOSPC)
	})
	reserveStillRoots(t, m, reserve)
}

// TestRootReserveKeptFromNames: what an owner makes takes blocks too: a
// directory its first one, an attribute too big for the inode one of its
// own, a directory's entries (a hard link's) theirs. Made by the daemon as root, 7,762 directories took this image's
// last unprivileged blocks and went on into root's reserve until the
// inodes ran out. Now each made object or link takes a block of the
// room, an attribute its size, and past it the owner gets ENOSPC, audited.
func TestRootReserveKeptFromNames(t *testing.T) {
	t.Parallel()
	m, reserve := reserveMount(t, func(m *Mount) {
		writeFile(t, m.BackingPath("keep"), "x\n")
		// A few hundred directories reach the end of the room.
		hostLeaves(t, m, 256)
	})
	var err error
	made := 0
	for ; made < 100000; made++ {
		if err = os.Mkdir(m.Path(fmt.Sprintf("d%d", made)), 0o755); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("mkdir #%d: %v, want ENOSPC", made, err)
	}
	m.WaitAudit("the mkdir past the room of a writer that is not root", func(e auditEntry) bool {
		return e.str("op") == "mkdir" && e.str("code") == "RESOURCE_LIMIT" && e.errnoIs(syscall.ENOSPC)
	})
	// (Within the mkdirs' burst of refusals: no audit lines of their own.)
	if err := os.Link(m.Path("keep"), m.Path("keep-again")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("link with no room left: %v, want ENOSPC (a directory's entries take blocks)", err)
	}
	if err := unix.Setxattr(m.Path("keep"), "user.big", bytes.Repeat([]byte{'v'}, 900), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("setxattr of 900 bytes with no room left: %v, want ENOSPC", err)
	}
	t.Logf("%d directories made before the room ran out", made)
	reserveStillRoots(t, m, reserve)
}

// hostLeaves has the host take all but blocks of the blocks m's BACKING
// leaves a writer that is not root (a file, host-data, written natively).
func hostLeaves(t *testing.T, m *Mount, blocks uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(m.Backing, &st); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.BackingPath("host-data"), string(bytes.Repeat([]byte{'h'}, int(st.Bavail-blocks)*int(st.Bsize))))
}

// reserveMount mounts a BACKING that is a 32 MiB ext4 image keeping half
// its blocks for root, prepared by prepare (nil: empty), and returns the
// mount and the bytes kept for root.
func reserveMount(t *testing.T, prepare func(m *Mount)) (*Mount, int64) {
	t.Helper()
	m := mount(t, Ext4Backing(t, 32<<20, 50, prepare))
	var st unix.Statfs_t
	if err := unix.Statfs(m.Backing, &st); err != nil {
		t.Fatal(err)
	}
	reserve := int64(st.Bfree-st.Bavail) * st.Bsize
	if reserve < 8<<20 {
		t.Fatalf("the image keeps %d bytes for root, want about half its 32 MiB", reserve)
	}
	return m, reserve
}

// Ext4Backing makes BACKING an ext4 image of size bytes keeping
// reservePct percent of its blocks for root (mkfs.ext4 -m), loop-mounted
// for the test and prepared by prepare (nil: left empty). It skips the
// test where images cannot be mounted.
func Ext4Backing(t *testing.T, size int64, reservePct int, prepare func(m *Mount)) MountOption {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting an ext4 image needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipped: no loop device (%v)", err)
	}
	requireTool(t, "mkfs.ext4")
	return Prepare(func(m *Mount) {
		imageBacking(t, m, "ext4", size, func(img, dir string) {
			run(t, "", nil, "mkfs.ext4", "-q", "-F", "-m", strconv.Itoa(reservePct), img)
			if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
				t.Skipf("skipped: mount -o loop of an ext4 image failed: %v: %s", err, out)
			}
		}, []string{"umount"})
		if prepare != nil {
			prepare(m)
		}
	})
}

// reserveStillRoots checks that root's reserve of reserve bytes is
// nearly all free after the writes through the mount, and that the
// host's root still writes into it.
func reserveStillRoots(t *testing.T, m *Mount, reserve int64) {
	t.Helper()
	var after unix.Statfs_t
	if err := unix.Statfs(m.Backing, &after); err != nil {
		t.Fatal(err)
	}
	if free := int64(after.Bfree) * after.Bsize; free < reserve*9/10 {
		t.Fatalf("root's reserve of %d bytes was written into: %d bytes free after the writes through the mount", reserve, free)
	}
	writeFile(t, m.BackingPath("host-root-log"), string(bytes.Repeat([]byte{'r'}, 4<<20)))
}

// TestRootReserveKeptFromJournal: the journal's records are written by
// the daemon as root too. With no room left for a writer that is not
// root, an agent's metadata changes (8,000 chmods: records, no data, 3
// MiB of them on this image of 1 KiB blocks) went on into root's reserve,
// up to journal_max; now a record past the
// room refuses its change (ENOSPC, audited RESOURCE_LIMIT) and the
// journal drops its oldest records, after which the change goes through:
// the journal turns over within what it holds, and root's reserve stays
// the host's.
func TestRootReserveKeptFromJournal(t *testing.T) {
	t.Parallel()
	m, reserve := reserveMount(t, func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "x\n")
		// Too little for the journal to preallocate a segment.
		hostLeaves(t, m, 64)
	})
	refused := 0
	for i := range 8000 {
		mode := os.FileMode(0o600 | i%2*0o40)
		off := m.LogSize()
		err := os.Chmod(m.Path("f"), mode)
		if errors.Is(err, syscall.ENOSPC) {
			// The refusal asked the pruner to make room: once it has,
			// the same change is recorded.
			refused++
			m.WaitLoggedSince(off, "journal pruned")
			err = os.Chmod(m.Path("f"), mode)
		}
		if err != nil {
			t.Fatalf("chmod #%d: %v", i, err)
		}
	}
	if refused == 0 {
		t.Fatal("8,000 records with no room left were never refused")
	}
	m.WaitAudit("the change whose record had no room", func(e auditEntry) bool {
		return e.str("code") == "RESOURCE_LIMIT" && e.errnoIs(syscall.ENOSPC)
	})
	t.Logf("%d chmods refused until the journal dropped its oldest records", refused)
	reserveStillRoots(t, m, reserve)
}
