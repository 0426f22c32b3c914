package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Routes by which a process on the mount could get a credential's bytes
// (an adversarial review, 2026-12-04): the first three leaked before
// their fixes; the last tries the routes the guard blocks.

// TestJournalDiffWithholdsRemovedCredential: a process on the mount
// removes a credential the host placed (allowed: "removal reveals
// nothing"); the journal keeps the removed file in .realm-journal/kept/,
// and `realmfs journal diff` (and so `realmctl session diff`, which runs
// it for a session's owner) printed the credential's whole content as a
// "deleted file" hunk. It lists the removal and withholds the content,
// also of a hard link to a key removed under its innocent name (known to
// the daemon by identity).
func TestJournalDiffWithholdsRemovedCredential(t *testing.T) {
	t.Parallel()
	const secret = "AWS_SECRET_ACCESS_KEY=review-diff-leak-0123456789\n"
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nreview-diff-leak-key\n-----END OPENSSH PRIVATE KEY-----\n"
	m := mount(t, Opts("journal=on"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), secret)
		writeFile(t, m.BackingPath("deploy", ".ssh", "id_ed25519"), key)
		if err := os.Link(m.BackingPath("deploy", ".ssh", "id_ed25519"), m.BackingPath("notes.txt")); err != nil {
			t.Fatal(err)
		}
	}))
	// The guard refuses the read, as it should.
	if _, err := os.ReadFile(m.Path(".env")); errnoOf(err) != unix.EACCES {
		t.Fatalf("read .env through the mount: %v, want EACCES", err)
	}
	// Removing is allowed; rm -r of a directory holding a key too.
	if err := os.Remove(m.Path(".env")); err != nil {
		t.Fatalf("rm .env through the mount: %v", err)
	}
	if err := os.Remove(m.Path("notes.txt")); err != nil {
		t.Fatalf("rm notes.txt (a hard link of the key) through the mount: %v", err)
	}
	if err := os.RemoveAll(m.Path("deploy")); err != nil {
		t.Fatalf("rm -r deploy through the mount: %v", err)
	}
	diff := realmfsJournal(t, "diff", m.Dir)
	t.Logf("realmfs journal diff %s:\n%s", m.Dir, diff)
	for _, s := range []string{"review-diff-leak-0123456789", "review-diff-leak-key"} {
		if strings.Contains(diff, s) {
			t.Errorf("realmfs journal diff prints the content of a credential removed through the mount (%q)", s)
		}
	}
	for _, name := range []string{".env", "notes.txt", "deploy/.ssh/id_ed25519"} {
		if !strings.Contains(diff, "deleted file "+name+": ") || !strings.Contains(diff, "withheld (a credential)") {
			t.Errorf("realmfs journal diff does not list the removal of %s with its content withheld", name)
		}
	}
}

// TestJournalDiffWithholdsHostFilledCredential: the agent creates an
// empty .env through the mount (a made file: allowed), the person fills
// in the secret on the host (the file is host-placed from then on,
// refused through the mount), and `realmfs journal diff` of the agent's
// changes printed the host's secret as the content of the file the agent
// "created".
func TestJournalDiffWithholdsHostFilledCredential(t *testing.T) {
	t.Parallel()
	const secret = "STRIPE_KEY=sk_live_review_hostfilled_42\n"
	m := mount(t, Opts("journal=on"))
	writeFile(t, m.Path(".env"), "")
	// The host fills it in, in place (as an editor that writes in place,
	// or echo >> .env).
	f, err := os.OpenFile(m.BackingPath(".env"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(secret); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.ReadFile(m.Path(".env")); errnoOf(err) != unix.EACCES {
		t.Fatalf("read .env after the host filled it: %v, want EACCES", err)
	}
	diff := realmfsJournal(t, "diff", m.Dir)
	t.Logf("realmfs journal diff %s:\n%s", m.Dir, diff)
	if strings.Contains(diff, "sk_live_review_hostfilled_42") {
		t.Errorf("realmfs journal diff prints the host's secret in .env, which the mount refuses to read")
	}
	if !strings.Contains(diff, "created file .env: ") {
		t.Errorf("realmfs journal diff does not list .env as created")
	}
}

// TestRemountKeepsCredentialLinkIdentity: a credential the host
// hard-linked under an innocent name is refused under that name
// (TestCredentialUnlinkKeepsIdentity), also after its credential name is
// removed through the mount. The identity lived only in the daemon's
// memory: after a remount (the next session, a reboot, realm-csi's next
// publish) the mount-time scan found no credential path holding the file,
// and the innocent name read the key. The identity is saved in the
// daemon's state before the removal, so a kill -9 keeps it too.
func TestRemountKeepsCredentialLinkIdentity(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "unmounted", true: "killed"}[kill], func(t *testing.T) {
			t.Parallel()
			const secret = "-----BEGIN OPENSSH PRIVATE KEY----- review-remount\n"
			m := mount(t, Prepare(func(m *Mount) {
				writeFile(t, m.BackingPath(".ssh", "id_ed25519"), secret)
				if err := os.Link(m.BackingPath(".ssh", "id_ed25519"), m.BackingPath("notes.txt")); err != nil {
					t.Fatal(err)
				}
			}))
			if _, err := os.ReadFile(m.Path("notes.txt")); errnoOf(err) != unix.EACCES {
				t.Fatalf("read notes.txt (hard link of the key): %v, want EACCES", err)
			}
			// The agent removes the credential's name (allowed).
			if err := os.Remove(m.Path(".ssh", "id_ed25519")); err != nil {
				t.Fatalf("rm .ssh/id_ed25519 through the mount: %v", err)
			}
			if _, err := os.ReadFile(m.Path("notes.txt")); errnoOf(err) != unix.EACCES {
				t.Fatalf("read notes.txt after the rm: %v, want EACCES", err)
			}
			if kill {
				m.Kill()
			} else if err := m.Unmount(); err != nil {
				t.Fatal(err)
			}
			m.Restart()
			got, err := os.ReadFile(m.Path("notes.txt"))
			if err == nil {
				t.Errorf("after a remount, notes.txt (the host's key under another name) reads through the mount: %q", got)
			} else if errnoOf(err) != unix.EACCES {
				t.Errorf("read notes.txt after a remount: %v, want EACCES", err)
			}
		})
	}
}

// credentialProbe runs a shell snippet as uid/gid (0: as root) in dir and
// returns its combined output.
func credentialProbe(t *testing.T, dir string, uid int, script string) string {
	t.Helper()
	var cmd *exec.Cmd
	if uid == 0 {
		cmd = exec.Command("sh", "-c", script)
	} else {
		cmd = exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", "sh", "-c", script)
	}
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestCredentialRoutesBlocked tries the routes that the guard is meant
// to block, as root and as the file's owner (uid 1000); it fails only if
// one of them yields the secret.
func TestCredentialRoutesBlocked(t *testing.T) {
	t.Parallel()
	requireTool(t, "setpriv", "python3")
	const secret = "review-blocked-secret-42"
	m := mount(t, Opts("allow_other", "default_permissions"), Prepare(func(m *Mount) {
		if err := os.Chmod(m.Backing, 0o777); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{".env", "k/server.pem", ".aws/credentials", "u/.env"} {
			writeFile(t, m.BackingPath(p), secret+"\n")
		}
		for _, d := range []string{"k", ".aws", "u"} {
			os.Chmod(m.BackingPath(d), 0o777)
		}
		for _, p := range []string{".env", "k/server.pem", ".aws/credentials", "u/.env"} {
			os.Chown(m.BackingPath(p), 1000, 1000)
			os.Chmod(m.BackingPath(p), 0o600)
		}
		os.Chown(m.BackingPath("u"), 1000, 1000)
		if err := unix.Setxattr(m.BackingPath(".env"), "user.secret", []byte(secret), 0); err != nil {
			t.Logf("setxattr user.secret: %v", err)
		}
		// Host-planted symlinks inside the workspace pointing at credentials.
		os.Symlink(".env", m.BackingPath("planted-link"))
		os.Symlink(".aws", m.BackingPath("planted-dir"))
	}))
	const py = `
import os, sys, fcntl, ctypes
def tryit(what, fn):
    try:
        r = fn()
        print(what, "OK", r)
    except Exception as e:
        print(what, "ERR", e)
def rd(p):
    with open(p, "rb") as f: return f.read()
tryit("cat .env", lambda: rd(".env"))
tryit("cat .ENV", lambda: rd(".ENV"))
tryit("cat .env.", lambda: rd(".env."))
tryit("cat planted-link", lambda: rd("planted-link"))
tryit("cat planted-dir/credentials", lambda: rd("planted-dir/credentials"))
tryit("cat ./k/../.env", lambda: rd("./k/../.env"))
def opath():
    fd = os.open(".env", os.O_PATH)
    return rd("/proc/self/fd/%d" % fd)
tryit("O_PATH reopen", opath)
def linkat_opath():
    fd = os.open(".env", os.O_PATH)
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.linkat(fd, b"", -100, b"opath-link.txt", 0x1000)
    if r != 0: raise OSError(ctypes.get_errno(), "linkat AT_EMPTY_PATH")
    return rd("opath-link.txt")
tryit("linkat AT_EMPTY_PATH", linkat_opath)
def linkit():
    os.link(".env", "hl.txt"); return rd("hl.txt")
tryit("link .env hl.txt", linkit)
def renameit():
    os.rename(".env", "rn.txt"); return rd("rn.txt")
tryit("rename .env rn.txt", renameit)
def renamedir():
    os.rename(".aws", "aws2"); return rd("aws2/credentials")
tryit("rename .aws aws2", renamedir)
def renamedir2():
    os.rename("k", "k2"); return rd("k2/server.pem")
tryit("rename k k2", renamedir2)
def symlinkit():
    os.symlink(".env", "sl"); return rd("sl")
tryit("symlink sl -> .env", symlinkit)
def heldcwd():
    fd = os.open("k", os.O_RDONLY|os.O_DIRECTORY)
    try:
        os.rename("k", "k3")
    except Exception as e:
        pass
    f = os.open("server.pem", os.O_RDONLY, dir_fd=fd)
    return os.read(f, 100)
tryit("openat held dir fd", heldcwd)
tryit("getxattr user.secret", lambda: os.getxattr(".env", "user.secret"))
tryit("listxattr", lambda: os.listxattr(".env"))
def chmodit():
    os.chmod(".env", 0o644); return oct(os.stat(".env").st_mode)
tryit("chmod .env", chmodit)
def trunc():
    os.truncate(".env", 1); return os.stat(".env").st_size
tryit("truncate .env", trunc)
def appendit():
    with open(".env", "ab") as f: f.write(b"x")
    return "appended"
tryit("append .env", appendit)
def rw():
    fd = os.open(".env", os.O_RDWR); return os.read(fd, 100)
tryit("O_RDWR .env", rw)
def cfr():
    src = os.open(".env", os.O_RDONLY)
    dst = os.open("cfr.txt", os.O_RDWR|os.O_CREAT, 0o644)
    os.copy_file_range(src, dst, 100)
    return rd("cfr.txt")
tryit("copy_file_range", cfr)
def ficlone():
    src = os.open(".env", os.O_PATH)
    dst = os.open("clone.txt", os.O_RDWR|os.O_CREAT, 0o644)
    fcntl.ioctl(dst, 0x40049409, src)
    return rd("clone.txt")
tryit("FICLONE", ficlone)
def exchange():
    with open("x.txt","w") as f: f.write("x")
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.renameat2(-100, b"x.txt", -100, b".env", 2)
    if r != 0: raise OSError(ctypes.get_errno(), "renameat2 EXCHANGE")
    return rd("x.txt")
tryit("RENAME_EXCHANGE", exchange)
`
	for _, uid := range []int{0, 1000} {
		out := credentialProbe(t, m.Dir, uid, "python3 -c '"+strings.ReplaceAll(py, "'", `'"'"'`)+"'")
		t.Logf("uid %d:\n%s", uid, out)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " OK ") && strings.Contains(line, secret) {
				t.Errorf("uid %d: leak: %s", uid, line)
			}
		}
	}
	_ = syscall.Getuid
}
