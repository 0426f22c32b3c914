package e2e

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The modes of new objects, pjdfstest style: the same commands run in a
// native directory and on the mount, and what they made must match.

// makeObjects makes one object of each kind in the directory it is given
// ($2) and in its acl/ and sgid/ subdirectories, under the umask $1: a
// file by sh's redirection, one by open(O_CREAT, 0666), a unix socket by
// bind, a directory, a fifo, a symlink, a file rewritten by `echo >` (it
// keeps its mode) and a cp of a 0755 file.
const makeObjects = `set -e
umask "$1"
make() {
	cd "$1"
	: > redirect
	/usr/bin/python3 -c 'import os, socket
os.close(os.open("creat", os.O_CREAT | os.O_WRONLY, 0o666))
socket.socket(socket.AF_UNIX).bind("sock")'
	mkdir dir
	mkfifo fifo
	ln -s redirect link
	echo a > kept
	chmod 0640 kept
	echo b > kept
	echo x > exe
	chmod 0755 exe
	cp exe copy
	cd - > /dev/null
}
make "$2"
make "$2/acl"
make "$2/sgid"
`

// listObjects prints each object beneath $1 (not following links) with its
// mode, owner and ACLs (hex of the system.posix_acl_* attributes).
const listObjects = `import os, sys
top = sys.argv[1]
out = []
for root, dirs, files in os.walk(top):
    for n in dirs + files:
        p = os.path.join(root, n)
        st = os.lstat(p)
        line = "%s %o %d:%d" % (os.path.relpath(p, top), st.st_mode, st.st_uid, st.st_gid)
        for a in ("access", "default"):
            try:
                line += " %s=%s" % (a, os.getxattr(p, "system.posix_acl_" + a, follow_symlinks=False).hex())
            except OSError:
                pass
        out.append(line)
print("\n".join(sorted(out)))
`

// ACL entry tags, as Linux stores them in system.posix_acl_* (uapi
// linux/posix_acl.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclXattr encodes an ACL (entries of tag, perm, id; sorted by tag and id,
// as the kernel requires) as the value of system.posix_acl_*.
func aclXattr(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

// sharedDefaultACL lets the owner, nobody and the group write, others
// read: under it a new file's mode ignores the umask (POSIX.1e).
var sharedDefaultACL = aclXattr(
	[3]uint32{aclUserObj, 7, ^uint32(0)},
	[3]uint32{aclUser, 7, nobody},
	[3]uint32{aclGroupObj, 7, ^uint32(0)},
	[3]uint32{aclMask, 7, ^uint32(0)},
	[3]uint32{aclOther, 5, ^uint32(0)},
)

// prepareModeDir makes dir (writable by everyone) with acl/, which has
// sharedDefaultACL, and sgid/, a set-group-ID directory, beneath it.
func prepareModeDir(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o777}, {filepath.Join(dir, "acl"), 0o777}, {filepath.Join(dir, "sgid"), 0o777 | os.ModeSetgid}} {
		if err := os.Mkdir(d.path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(dir, "acl"), "system.posix_acl_default", sharedDefaultACL, 0); err != nil {
		t.Fatalf("setting a default ACL on %s: %v", dir, err)
	}
}

// runAs runs a command as cred (nil: root) in dir and fails the test
// unless it exits 0; it returns the output.
func runAs(t *testing.T, cred *syscall.Credential, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCreatedModes: under each umask, as root and as a user the daemon
// hands objects over to (allow_other), files, directories, fifos, sockets
// and symlinks made on the mount get the modes (and ACLs) they get in a
// native directory: the caller's umask applies once, the daemon's never,
// and in a directory with a default ACL the ACL decides instead.
func TestCreatedModes(t *testing.T) {
	t.Parallel()
	requireTool(t, "/usr/bin/python3", "mkfifo", "cp")
	m := mount(t, Opts("allow_other"))
	native := filepath.Join(m.Outside, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		cred *syscall.Credential
	}{{"root", nil}, {"nobody", asNobody}} {
		for _, umask := range []string{"000", "002", "022", "077"} {
			name := who.name + "-umask" + umask
			t.Run(name, func(t *testing.T) {
				want, got := filepath.Join(native, name), m.Path(name)
				prepareModeDir(t, want)
				prepareModeDir(t, got)
				runAs(t, who.cred, "/bin/sh", "-c", makeObjects, "sh", umask, want)
				runAs(t, who.cred, "/bin/sh", "-c", makeObjects, "sh", umask, got)
				w := runAs(t, nil, "/usr/bin/python3", "-c", listObjects, want)
				g := runAs(t, nil, "/usr/bin/python3", "-c", listObjects, got)
				if g != w {
					t.Errorf("modes on the mount differ from native ones:\n%s", lineDiff(w, g))
				}
			})
		}
	}
}

// lineDiff lists the lines only native has ("- ") and those only the
// mount has ("+ ").
func lineDiff(native, mount string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	n, m := in(native), in(mount)
	var out []string
	for _, l := range strings.Split(native, "\n") {
		if !m[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(mount, "\n") {
		if !n[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDeviceNodesRefused: a block or character device made on the mount,
// even by root with CAP_MKNOD, is refused EPERM and audited
// DEVICE_NODE_DENIED, and nothing appears in BACKING (a directory of the
// host, where the node would open as the device). Fifos, sockets and
// regular files made by mknod are allowed, with native modes, and the
// mount itself is nodev and nosuid.
func TestDeviceNodesRefused(t *testing.T) {
	t.Parallel()
	m := mount(t)
	// The caller must hold CAP_MKNOD, or the kernel refuses before the
	// daemon is asked.
	probeNode := filepath.Join(m.Outside, "null")
	if err := unix.Mknod(probeNode, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod of a device natively: %v (no CAP_MKNOD)", err)
	}
	os.Remove(probeNode)

	var sfs unix.Statfs_t
	if err := unix.Statfs(m.Dir, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Flags&unix.ST_NODEV == 0 || sfs.Flags&unix.ST_NOSUID == 0 {
		t.Errorf("mount flags %#x: want nodev and nosuid", sfs.Flags)
	}

	for _, d := range []struct {
		name string
		mode uint32
		dev  uint64
	}{{"blk", unix.S_IFBLK | 0o600, unix.Mkdev(1, 2)}, {"chr", unix.S_IFCHR | 0o666, unix.Mkdev(1, 3)}} {
		err := unix.Mknod(m.Path(d.name), d.mode, int(d.dev))
		wantErrno(t, err, unix.EPERM, "mknod "+d.name)
		e := m.WaitRefusal("mknod", d.name, "DEVICE_NODE_DENIED", unix.EPERM)
		checkAuditFields(t, e)
		assertAbsent(t, m.BackingPath(d.name))
	}
	// The daemon runs with umask 0; what it makes for itself has its own
	// explicit mode.
	if st := lstat(t, m.AuditLog); st.Mode&07777 != 0o600 {
		t.Errorf("audit log mode %o, want 600", st.Mode&07777)
	}
	// mknod(1) says what the caller sees.
	if out, err := runErr(t, m.Dir, nil, "mknod", "n", "c", "1", "3"); err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("mknod n c 1 3: %v, %q; want Operation not permitted", err, out)
	}

	// Everything but devices, as pjdfstest's mknod and mkfifo cases make
	// them, under a umask the daemon applies.
	old := unix.Umask(0o027)
	defer unix.Umask(old)
	for _, o := range []struct {
		name string
		mode uint32
		want uint32
	}{
		{"fifo", unix.S_IFIFO | 0o666, unix.S_IFIFO | 0o640},
		{"sock", unix.S_IFSOCK | 0o644, unix.S_IFSOCK | 0o640},
		{"reg", unix.S_IFREG | 0o755, unix.S_IFREG | 0o750},
		{"notype", 0o644, unix.S_IFREG | 0o640},
	} {
		if err := unix.Mknod(m.Path(o.name), o.mode, 0); err != nil {
			t.Errorf("mknod %s %o: %v", o.name, o.mode, err)
			continue
		}
		if st := lstat(t, m.Path(o.name)); st.Mode != o.want {
			t.Errorf("mknod %s %o: mode %o, want %o", o.name, o.mode, st.Mode, o.want)
		}
	}
	l, err := net.Listen("unix", m.Path("listener"))
	if err != nil {
		t.Fatalf("binding a unix socket on the mount: %v", err)
	}
	defer l.Close()
	if st := lstat(t, m.Path("listener")); st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Errorf("bound socket has mode %o", st.Mode)
	}
}
