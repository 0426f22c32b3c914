package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// requireCaseRefused checks that reading and overwriting each name through
// the mount is refused with a CREDENTIAL_PATH_DENIED audit line, and that
// the backing file behind it (backing[name]) is byte-identical after.
func requireCaseRefused(t *testing.T, m *Mount, names map[string]string) {
	t.Helper()
	before := map[string][]byte{}
	for _, b := range names {
		data, err := os.ReadFile(m.BackingPath(b))
		if err != nil {
			t.Fatal(err)
		}
		before[b] = data
	}
	for name, b := range names {
		out, err := exec.Command("cat", m.Path(name)).CombinedOutput()
		if err == nil || bytes.Contains(out, before[b]) {
			t.Errorf("cat %s: %v, printed %q; want it refused", name, err, out)
		}
		m.WaitRefusal("open", name, "CREDENTIAL_PATH_DENIED", unix.EACCES)
		if out, err := exec.Command("sh", "-c", `echo X > "$1"`, "sh", m.Path(name)).CombinedOutput(); err == nil {
			t.Errorf("echo X > %s succeeded (%q)", name, out)
		}
		if got, err := os.ReadFile(m.BackingPath(b)); err != nil || !bytes.Equal(got, before[b]) {
			t.Errorf("%s after a refused write through %s = %q, %v; want %q", b, name, got, err, before[b])
		}
	}
}

// TestCaseFoldedCredentialNames: credential globs match case-insensitively
// and ignore a segment's trailing dots, on any BACKING: on ext4 .ENV is
// another file, and refusing it is harmless; on a case-insensitive one it
// is .env. Example files stay readable.
func TestCaseFoldedCredentialNames(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".ENV"), "A=1\n")
		writeFile(t, m.BackingPath(".SSH", "ID_RSA"), "KEY\n")
		writeFile(t, m.BackingPath("certs", "server.PEM"), "PEM\n")
		writeFile(t, m.BackingPath("certs", "client.pem."), "PEM.\n")
		writeFile(t, m.BackingPath(".env.example"), "A=\n")
		writeFile(t, m.BackingPath("app", ".env.sample"), "B=\n")
	}))
	requireCaseRefused(t, m, map[string]string{
		".ENV": ".ENV", ".SSH/ID_RSA": ".SSH/ID_RSA", "certs/server.PEM": "certs/server.PEM",
		"certs/client.pem.": "certs/client.pem.",
	})
	for _, f := range []string{".env.example", "app/.env.sample"} {
		if _, err := os.ReadFile(m.Path(f)); err != nil {
			t.Errorf("read %s: %v, want it allowed (an example file)", f, err)
		}
	}
}

// TestCaseInsensitiveBacking mounts realmfs over a vfat image, where .ENV
// opens .env: .ENV, .SSH/ID_RSA and server.pem. (vfat drops the dot) are
// refused with audit lines and writing through them leaves the files as
// they were.
func TestCaseInsensitiveBacking(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a vfat image needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipped: no loop device (%v)", err)
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err == nil && !bytes.Contains(fs, []byte("\tvfat\n")) {
		t.Skip("skipped: this kernel has no vfat (not in /proc/filesystems)")
	}
	requireTool(t, "mkfs.vfat")
	t.Parallel()
	caseInsensitiveBacking(t, "vfat", func(img, dir string) {
		run(t, "", nil, "mkfs.vfat", "-n", "REALM", img)
		if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
			t.Skipf("skipped: mount -o loop of a vfat image failed: %v: %s", err, out)
		}
	}, []string{"umount"}, map[string]string{".ENV": ".env", ".SSH/ID_RSA": ".ssh/id_rsa", "server.pem.": "server.pem"})
}

// TestCaseInsensitiveNTFS mounts realmfs over an NTFS image mounted with
// lowntfs-3g -o ignore_case (FUSE, so it needs no kernel module: it runs
// where vfat is missing), where .ENV opens .env: every other spelling of a
// credential is refused with an audit line, and writing through one leaves
// the file as it was.
func TestCaseInsensitiveNTFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting an NTFS image needs root")
	}
	requireTool(t, "mkntfs", "lowntfs-3g")
	t.Parallel()
	caseInsensitiveBacking(t, "ntfs", func(img, dir string) {
		run(t, "", nil, "mkntfs", "-F", "-Q", "-q", img)
		run(t, "", nil, "lowntfs-3g", "-o", "ignore_case", img, dir)
	}, []string{"fusermount3", "-u"}, map[string]string{".ENV": ".env", ".SSH/ID_RSA": ".ssh/id_rsa", "Server.PEM": "server.pem"})
}

// caseInsensitiveBacking makes a 16 MiB image of filesystem fs, mounts it
// as BACKING (mountImg) with .env, .ssh/id_rsa and server.pem in it, mounts
// realmfs over it, and checks that every spelling (case-folded name →
// the credential it opens) is refused. unmount is the command that detaches
// the image after realmfs is gone (BACKING is appended).
func caseInsensitiveBacking(t *testing.T, fs string, mountImg func(img, dir string), unmount []string, spellings map[string]string) {
	m := mount(t, Prepare(func(m *Mount) {
		imageBacking(t, m, fs, 16<<20, mountImg, unmount)
		writeFile(t, m.BackingPath(".env"), "SECRET=1\n")
		writeFile(t, m.BackingPath(".ssh", "id_rsa"), "PRIVATE KEY\n")
		writeFile(t, m.BackingPath("server.pem"), "PEM\n")
	}))
	// The backing filesystem does resolve the other spellings.
	if got := readFile(t, m.BackingPath(".ENV")); got != "SECRET=1\n" {
		t.Fatalf("%s does not resolve .ENV to .env: %q", fs, got)
	}
	requireCaseRefused(t, m, spellings)
}

// imageBacking makes an image file of size bytes (of file system fs) in a
// temp dir, has mountImg make a file system on it and mount it as m's
// BACKING, and registers unmount (BACKING appended) to detach it after
// realmfs is gone: registered before the mount's own cleanup, it runs
// after it.
func imageBacking(t *testing.T, m *Mount, fs string, size int64, mountImg func(img, dir string), unmount []string) {
	img := filepath.Join(t.TempDir(), fs+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	mountImg(img, m.Backing)
	t.Cleanup(func() {
		argv := append(unmount, m.Backing)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %v: %s", argv, err, out)
			exec.Command("umount", "-l", m.Backing).Run()
		}
	})
}

// TestRenameWhiteoutRefused: renameat2(RENAME_WHITEOUT) would leave a 0:0
// character device at the source name in BACKING, a device node mknod is
// refused; it is refused, audited, and nothing moves.
func TestRenameWhiteoutRefused(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("a"), "a\n")
	}))
	err := unix.Renameat2(unix.AT_FDCWD, m.Path("a"), unix.AT_FDCWD, m.Path("b"), unix.RENAME_WHITEOUT)
	wantErrno(t, err, unix.EACCES, "renameat2(RENAME_WHITEOUT)")
	m.WaitRefusal("rename", "a", "PATH_ESCAPE", unix.EACCES)
	st := lstat(t, m.BackingPath("a"))
	if st.Mode&unix.S_IFMT != unix.S_IFREG || readFile(t, m.BackingPath("a")) != "a\n" {
		t.Errorf("a in BACKING is mode %o after a refused whiteout rename", st.Mode)
	}
	assertAbsent(t, m.BackingPath("b"))
}

// TestSymlinkToTempRefused: a symlink whose target has a .realm-tmp-
// component, such as a live temp of a write in progress, is refused and
// audited: the temp does not exist on the mount.
func TestSymlinkToTempRefused(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("d", "f"), "old\n")
	}))
	finish := holdWrite(t, m.Path("d", "f"), "new\n")
	defer finish()
	temps := tempResidue(t, m.Backing)
	if len(temps) != 1 {
		t.Fatalf("temps in BACKING while f is written: %q", temps)
	}
	temp := filepath.Base(temps[0])
	for _, c := range []struct{ target, link string }{
		{temp, "d/l1"},
		{"../d/" + temp, "d/l2"},
		{"d/" + temp + "/x", "l3"},
		{".realm-tmp-nonexistent", "l4"},
	} {
		err := os.Symlink(c.target, m.Path(c.link))
		wantErrno(t, err, unix.EACCES, "symlink to "+c.target)
		m.WaitRefusal("symlink", c.link, "PATH_ESCAPE", unix.EACCES)
		assertAbsent(t, m.BackingPath(c.link))
	}
	if got := finish(); got != "close ok" {
		t.Errorf("the write: %q", got)
	}
}

// TestHiddenCredentialMkdir: with hide: true, mkdir of a credential name
// is refused like a create (EACCES, audited), whether or not it exists in
// BACKING, instead of EEXIST telling that a hidden .env is there.
func TestHiddenCredentialMkdir(t *testing.T) {
	t.Parallel()
	pol := writePolicy(t, "version: 1\ncredentials:\n  hide: true\n")
	m := mount(t, Flags("--policy", pol), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "A=1\n")
	}))
	for _, name := range []string{".env", ".aws", "x.pem"} {
		err := os.Mkdir(m.Path(name), 0o755)
		wantErrno(t, err, unix.EACCES, "mkdir "+name)
		m.WaitRefusal("mkdir", name, "CREDENTIAL_PATH_DENIED", unix.EACCES)
	}
	for _, name := range []string{".aws", "x.pem"} {
		assertAbsent(t, m.BackingPath(name))
	}
	if st := lstat(t, m.BackingPath(".env")); st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf(".env in BACKING changed: mode %o", st.Mode)
	}
	// An innocent directory is still made.
	if err := os.Mkdir(m.Path("src"), 0o755); err != nil {
		t.Errorf("mkdir src: %v", err)
	}
	if err := os.Mkdir(m.Path("src"), 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("mkdir src again: %v, want EEXIST", err)
	}
}
