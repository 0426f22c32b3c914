package e2e

// A write's flags as the kernel sends them (issue 29, defect 8): O_APPEND
// is read per write, so fcntl(F_SETFL) after the open counts as natively.

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// appendFlagScript writes AAAAAAAA\n to argv[1], then writes ZZZZ
// through a descriptor whose O_APPEND argv[2] changes after the open,
// and prints the file.
const appendFlagScript = `
import fcntl, os, sys
name, how = sys.argv[1], sys.argv[2]
with open(name, "w") as f:
    f.write("AAAAAAAA\n")
if how == "cleared":     # opened O_APPEND, cleared: a write at offset 0
    fd = os.open(name, os.O_WRONLY | os.O_APPEND)
    fcntl.fcntl(fd, fcntl.F_SETFL, 0)
    os.pwrite(fd, b"ZZZZ", 0)
elif how == "set":       # opened without, set: pwrite appends (Linux)
    fd = os.open(name, os.O_WRONLY)
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND)
    os.pwrite(fd, b"ZZZZ", 0)
elif how == "cleared-write":  # cleared, then write(2) at the file offset
    fd = os.open(name, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"BB\n")
    fcntl.fcntl(fd, fcntl.F_SETFL, 0)
    os.lseek(fd, 2, os.SEEK_SET)
    os.write(fd, b"ZZZZ")
elif how == "noappend":  # pwritev2(RWF_NOAPPEND), Linux 6.9 on
    fd = os.open(name, os.O_WRONLY | os.O_APPEND)
    os.pwritev(fd, [b"ZZZZ"], 0, getattr(os, "RWF_NOAPPEND", 0x20))
os.close(fd)
print(open(name).read(), end="")
`

// TestAppendFlagPerWrite: O_APPEND cleared with fcntl(F_SETFL, 0) after
// an O_APPEND open makes pwrite(fd, "ZZZZ", 0) write at offset 0, and set
// after a plain open makes it append, as natively (the script runs in a
// plain directory beside BACKING, then on the mount). Before, the daemon
// took O_APPEND from the open: the cleared descriptor's write went to the
// end of the file (AAAAAAAA\nZZZZ, natively ZZZZAAAA\n).
func TestAppendFlagPerWrite(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	m := mount(t)
	for _, how := range []string{"cleared", "set", "cleared-write"} {
		t.Run(how, func(t *testing.T) {
			native := run(t, m.Outside, nil, "python3", "-c", appendFlagScript, how, how)
			got := run(t, m.Dir, nil, "python3", "-c", appendFlagScript, how, how)
			if got != native {
				t.Errorf("on the mount the file is %q; natively %q", got, native)
			}
			if c := conflictCopies(t, m.BackingPath()); len(c) > 0 {
				t.Errorf("conflict copies made: %v", c)
			}
		})
	}
}

// TestAppendFlagNoAppendLimit pins a limit (docs/threat-model.md, "What a process on the
// mount sees"): pwritev2 with RWF_NOAPPEND through an O_APPEND descriptor
// appends on the mount. The kernel sends a WRITE with the file's flags
// (O_APPEND), not the write's, and the caller's offset in the place of the
// size it would put on an append; the daemon cannot tell the two apart
// without risking an append landing inside the file.
func TestAppendFlagNoAppendLimit(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3")
	m := mount(t)
	native, err := runErr(t, m.Outside, nil, "python3", "-c", appendFlagScript, "f", "noappend")
	if err != nil {
		t.Skipf("pwritev2(RWF_NOAPPEND) natively: %v (%s)", err, native)
	}
	got := run(t, m.Dir, nil, "python3", "-c", appendFlagScript, "f", "noappend")
	if native != "ZZZZAAAA\n" || got != "AAAAAAAA\nZZZZ" {
		t.Errorf("RWF_NOAPPEND: natively %q, on the mount %q; the limit documented is ZZZZAAAA\\n and AAAAAAAA\\nZZZZ", native, got)
	}
}

// TestFallocateShiftModesLimit pins a limit of FUSE: fallocate's
// FALLOC_FL_COLLAPSE_RANGE and FALLOC_FL_INSERT_RANGE answer EOPNOTSUPP on
// the mount, from the kernel (fs/fuse/file.c, fuse_file_fallocate, sends
// only KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE to a daemon), while BACKING's
// ext4 does them. The file is left as it was. PUNCH_HOLE does reach the
// daemon and works.
func TestFallocateShiftModesLimit(t *testing.T) {
	t.Parallel()
	m := mount(t)
	data := make([]byte, 4*4096)
	for i := range data {
		data[i] = byte('a' + i/4096)
	}
	for _, dir := range []string{m.Outside, m.Dir} {
		if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fallocate := func(dir string, mode uint32) error {
		fd, err := unix.Open(filepath.Join(dir, "f"), unix.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fallocate(fd, mode, 4096, 4096)
	}
	for _, mode := range []uint32{unix.FALLOC_FL_COLLAPSE_RANGE, unix.FALLOC_FL_INSERT_RANGE} {
		if err := fallocate(m.Outside, mode); err != nil {
			t.Skipf("fallocate mode %#x natively: %v", mode, err)
		}
		if err := fallocate(m.Dir, mode); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("fallocate mode %#x on the mount: %v; the kernel answers EOPNOTSUPP itself (if it passes the mode on now, make Node.Allocate's tests cover it and drop this limit)", mode, err)
		}
	}
	if got := readFile(t, m.Path("f")); got != string(data) {
		t.Errorf("the refused fallocates changed the file")
	}
	if err := fallocate(m.Dir, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE); err != nil {
		t.Fatalf("punch a hole on the mount: %v", err)
	}
	want := string(data[:4096]) + string(make([]byte, 4096)) + string(data[8192:])
	if got := readFile(t, m.Path("f")); got != want {
		t.Errorf("after punching [4096, 8192): the file is not the old one with that range zeroed")
	}
}
