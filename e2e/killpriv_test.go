package e2e

import (
	"encoding/binary"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteDropsPrivileges: realm asks the kernel for HANDLE_KILLPRIV_V2
// (no GETXATTR of security.capability before every write), so it drops
// privileges itself when content changes. Stricter than the kernel (which
// lets root keep set-ID bits, and a group-unexecutable set-group-ID): new
// content through the mount never keeps a set-ID bit or a file capability,
// whoever writes, since in BACKING the host would run the writer's bytes
// with them (docs/threat-model.md: host meaning).
func TestWriteDropsPrivileges(t *testing.T) {
	t.Parallel()
	// vfs_cap_data, revision 2: CAP_NET_RAW permitted.
	capData := make([]byte, 20)
	binary.LittleEndian.PutUint32(capData[0:], 0x02000000)
	binary.LittleEndian.PutUint32(capData[4:], 1<<unix.CAP_NET_RAW)
	m := mount(t, Opts("allow_other", "default_permissions"), Prepare(func(m *Mount) {
		for name, mode := range map[string]uint32{"suid": unix.S_ISUID | 0o777, "sgid": unix.S_ISGID | 0o777,
			"sgid-noexec": unix.S_ISGID | 0o767, "root": unix.S_ISUID | 0o755, "caps": 0o755} {
			writeFile(t, m.BackingPath(name), "old\n")
			if err := unix.Chmod(m.BackingPath(name), mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Setxattr(m.BackingPath("caps"), "security.capability", capData, 0); err != nil {
			t.Fatalf("setting a file capability: %v", err)
		}
	}))
	got := probe(t, asNobody, "append:"+m.Path("suid")+":x", "append:"+m.Path("sgid")+":x", "append:"+m.Path("sgid-noexec")+":x")
	for i, r := range got {
		if r != "ok" {
			t.Fatalf("write %d as uid 65534: %s", i, r)
		}
	}
	if err := os.WriteFile(m.Path("root"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.Path("caps"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{"suid": 0o777, "sgid": 0o777, "sgid-noexec": 0o767, "root": 0o755, "caps": 0o755} {
		st := lstat(t, m.BackingPath(name))
		if got := st.Mode & 07777; got != want {
			t.Errorf("%s after a write: mode %#o, want %#o", name, got, want)
		}
	}
	if _, err := unix.Getxattr(m.BackingPath("caps"), "security.capability", make([]byte, 64)); err != unix.ENODATA {
		t.Errorf("caps after a write: security.capability %v, want it gone (ENODATA)", err)
	}
}
