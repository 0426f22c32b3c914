package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// aclAccess is a system.posix_acl_access value (version 2, then tag,
// permissions and id per entry, by tag): owner rw, uid 1000 r, group r,
// mask r, others r.
func aclAccess() []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(2))
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, ^uint32(0)}, {0x02, 4, 1000}, {0x04, 4, ^uint32(0)}, {0x10, 4, ^uint32(0)}, {0x20, 4, ^uint32(0)}} {
		binary.Write(&b, binary.LittleEndian, e)
	}
	return b.Bytes()
}

// TestCommitSaysWhatXattrsItCannotKeep (issue 29, defect 3): a rewrite
// through the mount gives the file's new content its ACL and user.*
// attributes; one the daemon may not set on it (a security.* label, for a
// daemon that is not root) is left out, and the commit says so: an
// XATTR_NOT_KEPT audit line naming it, and a line in the daemon's log.
// The bytes are committed. Before, the label went without a word.
func TestCommitSaysWhatXattrsItCannotKeep(t *testing.T) {
	requireFUSE(t)
	openDevFuse(t)
	acl := aclAccess()
	m := mount(t, AsUser(nobody, nobody), Prepare(func(m *Mount) {
		f := m.BackingPath("f")
		writeFile(t, f, "old\n")
		if err := os.Chown(f, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		for name, val := range map[string][]byte{"system.posix_acl_access": acl, "user.kept": []byte("yes"), "security.realmtest": []byte("label")} {
			if err := unix.Setxattr(f, name, val, 0); err != nil {
				t.Skipf("setxattr %s in BACKING: %v", name, err)
			}
		}
	}))
	if got := probe(t, asNobody, "write:"+m.Path("f")+":new\n"); got[0] != "ok" {
		t.Fatalf("rewrite as uid 65534: %s", got[0])
	}
	f := m.BackingPath("f")
	if got := readFile(t, f); got != "new\n" {
		t.Errorf("BACKING f = %q after the rewrite, want new", got)
	}
	get := func(name string) ([]byte, error) {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(f, name, buf)
		return buf[:max(n, 0)], err
	}
	if v, err := get("system.posix_acl_access"); err != nil || !bytes.Equal(v, acl) {
		t.Errorf("the ACL after the rewrite: %x, %v; want it kept", v, err)
	}
	if v, err := get("user.kept"); err != nil || string(v) != "yes" {
		t.Errorf("user.kept after the rewrite: %q, %v; want it kept", v, err)
	}
	if _, err := get("security.realmtest"); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("security.realmtest after the rewrite: %v; the daemon (uid 65534) may not set it, so it is not kept", err)
	}
	e := m.WaitAudit("XATTR_NOT_KEPT for f", func(e auditEntry) bool {
		return e.str("code") == "XATTR_NOT_KEPT" && e.path() == "f"
	})
	if c := e.str("cause"); !strings.Contains(c, "security.realmtest") || strings.Contains(c, "user.kept") {
		t.Errorf("XATTR_NOT_KEPT's cause %q: want it to name security.realmtest alone", c)
	}
	if log := readFile(t, m.LogFile); !strings.Contains(log, "without extended attributes") || !strings.Contains(log, "security.realmtest") {
		t.Errorf("the daemon log does not tell of security.realmtest:\n%s", log)
	}
}
