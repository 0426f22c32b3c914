package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Host meaning (README: the threat model): what the mount makes is judged
// by what it means in BACKING, where the host sees it.

// TestDaemonFilesOutsideBacking: an audit log, a daemon log, a policy
// file or a state directory inside BACKING is refused before anything is
// mounted (exit 2 with the reason), named directly, through a symlink from
// outside, or by -o; otherwise `rm m/audit.jsonl` would erase the trail,
// and a made set written through the mount would unlock a host's secret.
// Nothing is created.
func TestDaemonFilesOutsideBacking(t *testing.T) {
	requireFUSE(t)
	root := t.TempDir()
	backing, mnt, outside := filepath.Join(root, "backing"), filepath.Join(root, "mnt"), filepath.Join(root, "etc")
	for _, d := range []string{backing, mnt, outside, filepath.Join(backing, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	policy := filepath.Join(backing, "realm.yaml")
	writeFile(t, policy, "version: 1\n")
	if err := os.Symlink(filepath.Join(backing, "logs"), filepath.Join(outside, "logs")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, role string
		args       []string
		made       string // a file the refused start must not create
	}{
		{"audit log in BACKING", "audit log", []string{"--audit-log", filepath.Join(backing, "audit.jsonl")}, filepath.Join(backing, "audit.jsonl")},
		{"audit log below BACKING, not yet made", "audit log", []string{"--audit-log", filepath.Join(backing, "logs", "new", "a.jsonl")}, filepath.Join(backing, "logs", "new")},
		{"audit log through a symlink", "audit log", []string{"--audit-log", filepath.Join(outside, "logs", "a.jsonl")}, filepath.Join(backing, "logs", "a.jsonl")},
		{"audit log by -o", "audit log", []string{"-o", "audit_log=" + filepath.Join(backing, "o.jsonl")}, filepath.Join(backing, "o.jsonl")},
		{"daemon log in BACKING", "log", []string{"--log", filepath.Join(backing, "realmfs.log")}, filepath.Join(backing, "realmfs.log")},
		{"policy file in BACKING", "policy file", []string{"--policy", policy}, ""},
		{"state directory in BACKING", "state directory", []string{"--state-dir", filepath.Join(backing, "state")}, filepath.Join(backing, "state")},
		{"state directory by -o", "state directory", []string{"-o", "state_dir=" + filepath.Join(backing, "logs")}, ""},
		{"journal directory by -o", "journal directory", []string{"-o", "journal=on,journal_dir=" + filepath.Join(backing, "logs")}, ""},
	} {
		args := append([]string{"-f"}, tc.args...)
		args = append(args, backing, mnt)
		code, out := startRaw(t, mnt, nil, 15*time.Second, args...)
		if code != 2 || !strings.Contains(out, tc.role+" ") || !strings.Contains(out, "inside the backing directory") {
			t.Errorf("%s (%v): exit %d, output %q; want exit 2 naming the %s inside the backing directory", tc.name, args, code, out, tc.role)
		}
		if tc.made != "" {
			if _, err := os.Lstat(tc.made); !os.IsNotExist(err) {
				t.Errorf("%s: %s exists after the refused start (%v)", tc.name, tc.made, err)
			}
		}
		if m, _ := mountFSType(mnt); m != "" {
			t.Fatalf("%s: something is mounted at %s", tc.name, mnt)
		}
	}
	// Beside BACKING (a sibling whose name has BACKING's as a prefix) is
	// outside.
	sib := backing + "-logs"
	if err := os.Mkdir(sib, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out := startRaw(t, mnt, nil, 15*time.Second, "--audit-log", filepath.Join(sib, "a.jsonl"), backing, mnt)
	if code != 0 {
		t.Fatalf("audit log beside BACKING: exit %d, output %q; want a mount", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", mnt).Run() })
	if typ, _ := mountFSType(mnt); typ == "" {
		t.Errorf("audit log beside BACKING: realmfs exited 0 but nothing is mounted at %s", mnt)
	}
}

// noSetID fails unless path in BACKING has no set-ID bit.
func noSetID(t *testing.T, path, what string) {
	t.Helper()
	if st := lstat(t, path); st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("%s: %s has mode %#o in BACKING; want no set-ID bit", what, path, st.Mode&07777)
	}
}

// TestSetIDPlant (issue 28, case 1): `cp /usr/bin/id m/x; chmod 4755 m/x`
// would leave BACKING/x set-user-ID root, which an unprivileged host user
// runs as euid 0. The chmod is refused (EPERM, PRIVILEGE_DENIED), and so is
// `install -m 2755`; a create asking for set-ID bits gets the mode without
// them (audited); an in-place commit and an append in place drop a host
// file's set-ID bits (root's write, which the kernel lets keep them); a
// set-group-ID directory stays allowed (group inheritance runs nothing).
func TestSetIDPlant(t *testing.T) {
	t.Parallel()
	requireTool(t, "cp", "install")
	m := mount(t, Prepare(func(m *Mount) {
		for _, name := range []string{"linked", "appended"} {
			writeFile(t, m.BackingPath(name), "#!/bin/sh\necho host\n")
			if err := unix.Chmod(m.BackingPath(name), 04755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Link(m.BackingPath("linked"), m.BackingPath("linked2")); err != nil {
			t.Fatal(err)
		}
	}))
	run(t, "/", nil, "cp", "/usr/bin/id", m.Path("x"))
	wantErrno(t, unix.Chmod(m.Path("x"), 04755), unix.EPERM, "chmod 4755 m/x")
	m.WaitRefusal("setattr", "x", "PRIVILEGE_DENIED", unix.EPERM)
	noSetID(t, m.BackingPath("x"), "after chmod 4755")
	// What the host's unprivileged user gets from running it.
	m.WaitNoWriter(m.BackingPath("x"))
	if out := strings.TrimSpace(runAs(t, asNobody, m.BackingPath("x"), "-u")); out != "65534" {
		t.Errorf("BACKING/x -u as uid 65534 printed %q; want 65534 (not set-user-ID)", out)
	}

	if out, err := runErr(t, "/", nil, "install", "-m", "2755", "/usr/bin/id", m.Path("y")); err == nil {
		t.Errorf("install -m 2755 through the mount succeeded:\n%s", out)
	}
	noSetID(t, m.BackingPath("y"), "after install -m 2755")
	m.WaitRefusal("setattr", "y", "PRIVILEGE_DENIED", unix.EPERM)

	fd, err := unix.Open(m.Path("z"), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 06755)
	if err != nil {
		t.Fatalf("open(O_CREAT, 06755): %v", err)
	}
	unix.Close(fd)
	noSetID(t, m.BackingPath("z"), "created with mode 06755")
	m.WaitAudit("create of z with set-ID bits", func(e auditEntry) bool {
		return e.str("op") == "create" && e.path() == "z" && e.str("code") == "PRIVILEGE_DENIED" && e.str("errno") == ""
	})

	// New content never keeps a host file's set-ID bits, root's neither:
	// the in-place commit of a file with two links, an append in place.
	if err := os.WriteFile(m.Path("linked"), []byte("#!/bin/sh\nid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noSetID(t, m.BackingPath("linked2"), "after root's in-place commit")
	f, err := os.OpenFile(m.Path("appended"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("id\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	noSetID(t, m.BackingPath("appended"), "after root's append")

	// Directories: set-group-ID is allowed, set-user-ID is not.
	if err := os.Mkdir(m.Path("shared"), 0o775); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(m.Path("shared"), 02775); err != nil {
		t.Errorf("chmod 2775 of a directory: %v", err)
	}
	if st := lstat(t, m.BackingPath("shared")); st.Mode&unix.S_ISGID == 0 {
		t.Errorf("shared: mode %#o in BACKING; want set-group-ID", st.Mode&07777)
	}
	wantErrno(t, unix.Chmod(m.Path("shared"), 04775), unix.EPERM, "chmod 4775 of a directory")
}

// TestCapabilityPlant (issue 28, case 2): `setcap cap_dac_read_search+ep
// m/c` on a copy of cat would let uid 65534 read root's 0600 files on the
// host. security.capability (by setcap or by setfattr) and every xattr
// outside the allowlist (trusted.*, security.*, user.overlay.*) are
// refused, EPERM, PRIVILEGE_DENIED; user.* and ACLs are set as natively.
func TestCapabilityPlant(t *testing.T) {
	t.Parallel()
	requireTool(t, "setcap", "getcap", "setfattr", "getfattr")
	m := mount(t)
	secret := filepath.Join(m.Outside, "root-only")
	writeFile(t, secret, "root's\n")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "/", nil, "cp", "/usr/bin/cat", m.Path("c"))
	if out, err := runErr(t, "/", nil, "setcap", "cap_dac_read_search+ep", m.Path("c")); err == nil {
		t.Errorf("setcap through the mount succeeded:\n%s", out)
	}
	m.WaitRefusal("setxattr", "c", "PRIVILEGE_DENIED", unix.EPERM)
	if out := run(t, "/", nil, "getcap", m.BackingPath("c")); strings.TrimSpace(out) != "" {
		t.Errorf("getcap BACKING/c = %q; want no capability", out)
	}
	if out, err := runErr(t, "/", nil, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", m.BackingPath("c"), secret); err == nil || strings.Contains(out, "root's") {
		t.Errorf("BACKING/c as uid 65534 read a root-only file: %q, %v", out, err)
	}
	// vfs_cap_data revision 2 with CAP_DAC_READ_SEARCH permitted, as setfattr writes it.
	for _, attr := range []string{"security.capability", "trusted.overlay.opaque", "security.selinux", "user.overlay.redirect"} {
		if out, err := runErr(t, "/", nil, "setfattr", "-n", attr, "-v", "0x0000000204000000000000000000000000000000", m.Path("c")); err == nil {
			t.Errorf("setfattr -n %s through the mount succeeded:\n%s", attr, out)
		}
		m.WaitAudit("setxattr "+attr, func(e auditEntry) bool {
			return e.str("op") == "setxattr" && e.path() == "c" && e.str("code") == "PRIVILEGE_DENIED" && e.str("rule") == "privilege:xattr"
		})
	}
	if _, err := unix.Getxattr(m.BackingPath("c"), "security.capability", make([]byte, 64)); err != unix.ENODATA {
		t.Errorf("BACKING/c: security.capability %v; want none (ENODATA)", err)
	}
	run(t, "/", nil, "setfattr", "-n", "user.origin", "-v", "mirror", m.Path("c"))
	if out := run(t, "/", nil, "getfattr", "--absolute-names", "--only-values", "-n", "user.origin", m.BackingPath("c")); out != "mirror" {
		t.Errorf("user.origin in BACKING = %q; want mirror", out)
	}
}

// symlinksResolveInside fails if a symlink in BACKING resolves, as the
// host's kernel follows it, outside BACKING.
func symlinksResolveInside(t *testing.T, backing string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(backing)
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(backing, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return nil
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // dangling: resolves nowhere
		}
		if real != root && !strings.HasPrefix(real, root+"/") {
			target, _ := os.Readlink(p)
			t.Errorf("BACKING/%s -> %q resolves on the host to %s, outside BACKING", strings.TrimPrefix(p, backing+"/"), target, real)
		}
		return nil
	})
}

// TestSymlinkChainEscape (issue 28, case 3): `mkdir m/d; ln -s .. m/d/up;
// ln -s d/up/.. m/x` reads as `d` but resolves to BACKING's parent, on the
// host and on the mount: ".." after a link climbs from the link's target.
// Every target must be normal (its ".." first) and climb no higher than
// its directory is deep, checked at symlink, at a hard link or rename of a
// link, at a rename of a directory holding links to a shallower place, and
// at readlink (for links the host made). A chain three links deep is
// refused by the same rule, in either order of making its links.
func TestSymlinkChainEscape(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		if err := os.MkdirAll(m.BackingPath("hd"), 0o755); err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{"hd/up": "..", "hx": "hd/up/..", "hd/out": "../../etc", "hd/in": "../p", "hd/chain": "out"} {
			if err := os.Symlink(target, m.BackingPath(link)); err != nil {
				t.Fatal(err)
			}
		}
	}))
	for _, dir := range []string{"d", "p", "a/b"} {
		if err := os.MkdirAll(m.Path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Made before the link that would make it escape, and after it.
	wantErrno(t, os.Symlink("d/up/..", m.Path("early")), unix.EACCES, "symlink early -> d/up/.. (d/up not yet made)")
	m.WaitRefusal("symlink", "early", "PATH_ESCAPE", unix.EACCES)
	if err := os.Symlink("..", m.Path("d/up")); err != nil {
		t.Fatalf("symlink d/up -> ..: %v", err)
	}
	wantErrno(t, os.Symlink("d/up/..", m.Path("x")), unix.EACCES, "symlink x -> d/up/..")
	m.WaitRefusal("symlink", "x", "PATH_ESCAPE", unix.EACCES)
	// Three links deep: q -> p/up -> .., then x3 -> q/p/up/.. climbs out.
	if err := os.Symlink("..", m.Path("p/up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("p/up", m.Path("q")); err != nil {
		t.Fatalf("symlink q -> p/up (normal, resolves to the root): %v", err)
	}
	wantErrno(t, os.Symlink("q/p/up/..", m.Path("x3")), unix.EACCES, "symlink x3 -> q/p/up/..")
	m.WaitRefusal("symlink", "x3", "PATH_ESCAPE", unix.EACCES)

	// A link given a shallower place climbs further: by rename, by a hard
	// link of the link, and beneath a directory renamed shallower.
	if err := os.Symlink("../../top", m.Path("a/b/l")); err != nil {
		t.Fatalf("symlink a/b/l -> ../../top: %v", err)
	}
	wantErrno(t, os.Rename(m.Path("a/b/l"), m.Path("l")), unix.EACCES, "rename a/b/l to l")
	m.WaitRefusal("rename", "a/b/l", "PATH_ESCAPE", unix.EACCES)
	wantErrno(t, unix.Linkat(unix.AT_FDCWD, m.Path("a/b/l"), unix.AT_FDCWD, m.Path("a/l"), 0), unix.EACCES, "link a/b/l to a/l")
	m.WaitRefusal("link", "a/l", "PATH_ESCAPE", unix.EACCES)
	wantErrno(t, os.Rename(m.Path("a/b"), m.Path("b")), unix.EACCES, "rename a/b to b")
	m.WaitRefusal("rename", "a/b/l", "PATH_ESCAPE", unix.EACCES)
	// Deeper is fine.
	if err := os.MkdirAll(m.Path("a/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.Path("a/b"), m.Path("a/c/b")); err != nil {
		t.Errorf("rename a/b to a/c/b (deeper): %v", err)
	}

	// A normal link whose resolution meets a link of the host's that leads
	// out (hd/out -> ../../etc), directly, through another of the host's
	// (hd/chain -> out) or one made through the mount (hdl -> hd): on the
	// host the new link would lead out too.
	if err := os.Symlink("hd", m.Path("hdl")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"hd/out", "hd/chain/passwd", "hdl/out"} {
		name := "via-" + strings.NewReplacer("/", "-", ".", "d").Replace(target)
		wantErrno(t, os.Symlink(target, m.Path(name)), unix.EACCES, "symlink "+name+" -> "+target)
		m.WaitRefusal("symlink", name, "PATH_ESCAPE", unix.EACCES)
	}
	if err := os.Symlink("hd/in", m.Path("via-in")); err != nil {
		t.Errorf("symlink via-in -> hd/in (the host's link stays inside): %v", err)
	}
	for _, l := range []string{"hd/out", "hd/chain"} {
		if err := os.Remove(m.BackingPath(l)); err != nil {
			t.Fatal(err)
		}
	}

	// The host's own non-normal link is not followed on the mount.
	_, err := os.Readlink(m.Path("hx"))
	wantErrno(t, err, unix.EACCES, "readlink hx -> hd/up/.. (made by the host)")
	m.WaitRefusal("readlink", "hx", "PATH_ESCAPE", unix.EACCES)
	if err := os.Remove(m.BackingPath("hx")); err != nil {
		t.Fatal(err)
	}
	symlinksResolveInside(t, m.Backing)
}
