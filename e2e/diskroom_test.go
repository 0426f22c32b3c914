package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
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
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting an ext4 image needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipped: no loop device (%v)", err)
	}
	requireTool(t, "mkfs.ext4")
	t.Parallel()
	const old = "the old content\n"
	m := mount(t, Prepare(func(m *Mount) {
		imageBacking(t, m, "ext4", 32<<20, func(img, dir string) {
			run(t, "", nil, "mkfs.ext4", "-q", "-F", "-m", "50", img)
			if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
				t.Skipf("skipped: mount -o loop of an ext4 image failed: %v: %s", err, out)
			}
		}, []string{"umount"})
		writeFile(t, m.BackingPath("keep"), old)
	}))
	var before unix.Statfs_t
	if err := unix.Statfs(m.Backing, &before); err != nil {
		t.Fatal(err)
	}
	reserve := int64(before.Bfree-before.Bavail) * before.Bsize
	if reserve < 8<<20 {
		t.Fatalf("the image keeps %d bytes for root, want about half its 32 MiB", reserve)
	}

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

	// The reserve is root's still: nearly all of it free, and the host's
	// root writes into it.
	var after unix.Statfs_t
	if err := unix.Statfs(m.Backing, &after); err != nil {
		t.Fatal(err)
	}
	if free := int64(after.Bfree) * after.Bsize; free < reserve*9/10 {
		t.Fatalf("root's reserve of %d bytes was written into: %d bytes free after the writes through the mount", reserve, free)
	}
	writeFile(t, m.BackingPath("host-root-log"), string(bytes.Repeat([]byte{'r'}, 4<<20)))
}
