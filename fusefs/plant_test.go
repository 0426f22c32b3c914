package fusefs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/fusefs/admit"
	"github.com/realm-dev/realm/locks"
)

// TestCommitRechecksProtect: a write whose file reaches a protected path
// by a move the guard did not judge (here: the engine's Renamed called directly, as
// Rename calls it after a rename it allowed) never commits there: the
// commit is refused, EACCES, audited PROTECTED_PATH_DENIED, and the temp
// goes. The e2e route (mv m/docker m/.docker with a descriptor held) is
// refused at the rename (e2e TestPlantRefused); this is the second line.
func TestCommitRechecksProtect(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "cfg", "old\n")
	h := tf.openWrite(t, 1, "cfg", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "old\nplanted\n")
	st := backingStat(t, tf, "cfg")
	if err := os.Rename(filepath.Join(tf.backing, "cfg"), filepath.Join(tf.backing, ".envrc")); err != nil {
		t.Fatal(err)
	}
	tf.engine.Renamed(locks.KeyOf(&st), tf.root, tf.rootFd, ".envrc")
	if errno := h.Fsync(as(1), 0); errno != syscall.EACCES {
		t.Errorf("commit at .envrc = %v, want EACCES", errno)
	}
	tf.wantContent(t, ".envrc", "old\n", "after the refused commit")
	tf.wantNoTemps(t)
	tf.wantAudit(t, "commit PROTECTED_PATH_DENIED EACCES")
	h.Release(as(1))
}

// TestAppendRechecksProtect: appends go into the file in place, so there
// is no commit to re-check; an append after the file reached a protected
// path by a move the guard did not judge is refused there instead, and the
// file keeps what it had.
func TestAppendRechecksProtect(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "cfg", "old\n")
	h := tf.openWrite(t, 1, "cfg", syscall.O_WRONLY|syscall.O_APPEND)
	writeAll(t, h, "more\n")
	st := backingStat(t, tf, "cfg")
	if err := os.Rename(filepath.Join(tf.backing, "cfg"), filepath.Join(tf.backing, ".envrc")); err != nil {
		t.Fatal(err)
	}
	tf.engine.Renamed(locks.KeyOf(&st), tf.root, tf.rootFd, ".envrc")
	if _, errno := h.Write(as(1), []byte("planted\n"), 0); errno != syscall.EACCES {
		t.Errorf("append at .envrc = %v, want EACCES", errno)
	}
	tf.wantContent(t, ".envrc", "old\nmore\n", "after the refused append")
	tf.wantAudit(t, "commit PROTECTED_PATH_DENIED EACCES")
	h.Flush(as(1))
	h.Release(as(1))
}

// TestMadeFollowsCommits: a credential-named file created through the
// mount stays readable across commits (each a new backing identity) and a
// utimensat through the mount; a change of its size or mtime behind the
// mount makes it a credential again.
func TestMadeFollowsCommits(t *testing.T) {
	tf := newTestFS(t, nil)
	if errno := nameOps["create"](tf, t, ".env"); errno != 0 {
		t.Fatalf("create .env = %v", errno)
	}
	for i, content := range []string{"A=1\n", "A=2\n"} {
		h := tf.openWrite(t, 1, ".env", syscall.O_WRONLY|syscall.O_TRUNC)
		writeAll(t, h, content)
		if errno := h.Fsync(as(1), 0); errno != 0 {
			t.Fatalf("commit %d: %v", i, errno)
		}
		h.Release(as(1))
		n := tf.lookup(t, ".env")
		if fh, _, errno := n.Open(as(2), syscall.O_RDONLY); errno != 0 {
			t.Errorf("open of .env after commit %d: %v, want it readable (made through the mount)", i, errno)
		} else {
			fileOf(fh).Release(as(2))
		}
	}
	if err := os.WriteFile(filepath.Join(tf.backing, ".env"), []byte("A=host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := tf.lookup(t, ".env")
	if _, _, errno := n.Open(as(2), syscall.O_RDONLY); errno != syscall.EACCES {
		t.Errorf("open of .env after the host rewrote it: %v, want EACCES", errno)
	}
}

// TestProtectByIdentity: a protected file the host hard-linked under an
// innocent name, once its protected name was looked up, is protected
// under that name: each change of the node is refused, EACCES,
// PROTECTED_PATH_DENIED with rule protect:identity, and the file keeps
// its content; an innocent file with two links is not. (The e2e test
// covers the mount-time scan's record.)
func TestProtectByIdentity(t *testing.T) {
	for _, c := range []struct {
		file, link string
		protected  bool
	}{
		{".envrc", "envrc.bak", true},
		{".bashrc", "bashrc.txt", true},
		{"notes", "notes.bak", false},
	} {
		t.Run(c.file, func(t *testing.T) {
			tf := newTestFS(t, nil)
			tf.write(t, c.file, "export A=1\n")
			tf.lookup(t, c.file)
			if err := os.Link(filepath.Join(tf.backing, c.file), filepath.Join(tf.backing, c.link)); err != nil {
				t.Fatal(err)
			}
			want := syscall.Errno(0)
			if c.protected {
				want = syscall.EACCES
			}
			for _, op := range []string{"chmod", "chown", "utimens", "truncate", "setxattr"} {
				if errno := credOps[op](tf.lookup(t, c.link)); errno != want {
					t.Errorf("%s of %s: %v, want %v", op, c.link, errno, want)
				}
			}
			if !c.protected {
				return
			}
			tf.wantContent(t, c.file, "export A=1\n", "after the refused changes")
			evs := tf.audit.events(t)
			if len(evs) != 5 {
				t.Errorf("%d audit lines for 5 refusals", len(evs))
			}
			for _, e := range evs {
				if e.Code != "PROTECTED_PATH_DENIED" || e.Rule != admit.RuleProtectedIdentity || e.Path != c.link {
					t.Errorf("audit %+v; want PROTECTED_PATH_DENIED %s of %s", e, admit.RuleProtectedIdentity, c.link)
				}
			}
		})
	}
}
