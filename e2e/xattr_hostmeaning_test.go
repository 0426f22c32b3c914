package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Extended attributes as the host reads them (found by an adversarial
// review, 2026-12-04; each test failed before its fix).

// posixACL is a system.posix_acl_* value: version 2, then (tag, perm, id)
// entries in the kernel's order.
func posixACL(entries ...[3]uint32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(2))
	for _, e := range entries {
		binary.Write(&b, binary.LittleEndian, struct {
			Tag, Perm uint16
			ID        uint32
		}{uint16(e[0]), uint16(e[1]), e[2]})
	}
	return b.Bytes()
}

// TestRewriteKeepsTheFilesACL: a rewrite through the mount commits a temp
// the daemon made in the file's directory, to which the backing
// filesystem gives the directory's default ACL. Copying the file's
// attributes onto it replaced nothing where the file had no ACL, so a
// write, by anyone, of a file in a directory with a default ACL gave the
// file the default ACL's named entries (up to its group bits): natively a
// write never changes a file's ACL, and only its owner may. The temp's
// inherited access ACL is now removed (dirfd.CopyXattrs).
//
// Steps: uid 1000 (the agent) owns d and sets, through the mount, a
// default ACL naming itself (allowed: posix_acl_default is on the
// allowlist). alice (uid 2000) has d/f, 0660, which uid 1000 may not read.
// alice rewrites f through the mount. On the host, uid 1000 now reads
// and writes alice's file.
func TestRewriteKeepsTheFilesACL(t *testing.T) {
	requireTool(t, "setfattr", "setpriv")
	const agent, alice = 1000, 2000
	m := mount(t, Opts("allow_other", "default_permissions"), Prepare(func(m *Mount) {
		d := m.BackingPath("d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, agent, agent); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"f", "native"} {
			p := m.BackingPath("d", name)
			writeFile(t, p, "alice's private notes\n")
			if err := os.Chown(p, alice, alice); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o660); err != nil {
				t.Fatal(err)
			}
		}
	}))
	asAgent := &syscall.Credential{Uid: agent, Gid: agent, Groups: []uint32{}}
	asAlice := &syscall.Credential{Uid: alice, Gid: alice, Groups: []uint32{}}

	// The agent sets a default ACL on its own directory, through the mount.
	def := posixACL([3]uint32{0x01, 7, ^uint32(0)}, [3]uint32{0x02, 7, agent}, [3]uint32{0x04, 5, ^uint32(0)},
		[3]uint32{0x10, 7, ^uint32(0)}, [3]uint32{0x20, 5, ^uint32(0)})
	if out, err := runErr(t, "/", nil, "setpriv", "--reuid=1000", "--regid=1000", "--clear-groups",
		"setfattr", "-n", "system.posix_acl_default", "-v", "0x"+hex.EncodeToString(def), m.Path("d")); err != nil {
		t.Skipf("setting a default ACL through the mount: %v\n%s", err, out)
	}
	if got := probe(t, asAgent, "read:"+m.BackingPath("d", "f")); !strings.HasPrefix(got[0], "err EACCES") {
		t.Fatalf("before: uid %d reading alice's BACKING/d/f: %s; want EACCES", agent, got[0])
	}

	// alice rewrites her file (O_TRUNC, as an editor or `>` does): natively,
	// then through the mount. (An append is made in place and takes no
	// temp: it does not show this.)
	if got := probe(t, asAlice, "write:"+m.BackingPath("d", "native")+":v2\n", "write:"+m.Path("d", "f")+":v2\n"); got[0] != "ok" || got[1] != "ok" {
		t.Fatalf("alice's rewrites: %q", got)
	}
	m.WaitNoWriter(m.BackingPath("d", "f"))
	buf := make([]byte, 256)
	if _, err := unix.Getxattr(m.BackingPath("d", "native"), "system.posix_acl_access", buf); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("native rewrite: BACKING/d/native has an access ACL (%v); the control is wrong", err)
	}
	if n, err := unix.Getxattr(m.BackingPath("d", "f"), "system.posix_acl_access", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("after alice's rewrite through the mount, BACKING/d/f has system.posix_acl_access %x (%v); natively (d/native) a rewrite leaves a file's ACL alone",
			buf[:max(n, 0)], err)
	}
	got := probe(t, asAgent, "read:"+m.BackingPath("d", "f"), "append:"+m.BackingPath("d", "f")+":agent was here\n")
	if !strings.HasPrefix(got[0], "err EACCES") || !strings.HasPrefix(got[1], "err EACCES") {
		t.Errorf("after: uid %d on the host, read of alice's BACKING/d/f: %s; append: %s; want EACCES for both (as before, and as d/native)",
			agent, got[0], got[1])
	}
}

// TestListxattrHidesTrustedNames: natively, listxattr by a process without
// CAP_SYS_ADMIN leaves trusted.* names out (the filesystem filters them);
// the daemon lists as root and the kernel passes a FUSE filesystem's list
// on as it is, so uid 65534 learned the names of a host file's trusted.*
// attributes through the mount. The mount lists none (guard.ListedXattr).
func TestListxattrHidesTrustedNames(t *testing.T) {
	requireTool(t, "getfattr", "setpriv")
	m := mount(t, Opts("allow_other", "default_permissions"), Prepare(func(m *Mount) {
		p := m.BackingPath("t")
		writeFile(t, p, "x\n")
		if err := unix.Setxattr(p, "trusted.realm-test", []byte("v"), 0); err != nil {
			t.Skipf("trusted xattr in BACKING: %v", err)
		}
	}))
	list := func(p string) string {
		out, _ := runErr(t, "/", nil, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "getfattr", "--absolute-names", "-m", "-", p)
		return out
	}
	if native := list(m.BackingPath("t")); strings.Contains(native, "trusted.realm-test") {
		t.Fatalf("natively uid 65534 lists %q; the control is wrong", native)
	}
	if mounted := list(m.Path("t")); strings.Contains(mounted, "trusted.realm-test") {
		t.Errorf("through the mount uid 65534 lists the host's trusted.* names:\n%s", mounted)
	}
}
