package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// nameOps are the operations that make, remove or rename a name in the
// root, each as the kernel would send it.
var nameOps = map[string]func(tf *testFS, t *testing.T, name string) syscall.Errno{
	"create": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, fh, _, errno := tf.root.Create(context.Background(), name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644, &out)
		if fh != nil {
			fileOf(fh).Release(context.Background())
		}
		return errno
	},
	"mknod": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, errno := tf.root.Mknod(context.Background(), name, syscall.S_IFIFO|0o644, 0, &out)
		return errno
	},
	"mkdir": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, errno := tf.root.Mkdir(context.Background(), name, 0o755, &out)
		return errno
	},
	"symlink": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, errno := tf.root.Symlink(context.Background(), "a.txt", name, &out)
		return errno
	},
	"link": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, errno := tf.root.Link(context.Background(), tf.lookup(t, "a.txt"), name, &out)
		return errno
	},
	"link from": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		var out fuse.EntryOut
		_, errno := tf.root.Link(context.Background(), tf.lookup(t, name), "b.txt", &out)
		return errno
	},
	"rename to": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		return tf.root.Rename(context.Background(), "a.txt", tf.root, name, 0)
	},
	"rename from": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		return tf.root.Rename(context.Background(), name, tf.root, "b.txt", 0)
	},
	"exchange": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		return tf.root.Rename(context.Background(), "a.txt", tf.root, name, 2 /* RENAME_EXCHANGE */)
	},
	"unlink": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		return tf.root.Unlink(context.Background(), name)
	},
	"rmdir": func(tf *testFS, t *testing.T, name string) syscall.Errno {
		return tf.root.Rmdir(context.Background(), name)
	},
}

// TestPrepareRefusals: every operation on a name runs prepare's checks in
// one order and refuses alike: read-only first; then a hidden name, absent
// (ENOENT, no audit line) to an operation that needs it to exist and
// refused (EACCES, PATH_ESCAPE) to one that would make it; then a
// credential, for every operation but a removal and mkdir. A refused
// operation leaves the backing dir as it was.
func TestPrepareRefusals(t *testing.T) {
	const hidden = TempPrefix + "0123456789abcdef"
	const escape, cred = "PATH_ESCAPE EACCES", "CREDENTIAL_PATH_DENIED EACCES"
	const protected = "PROTECTED_PATH_DENIED EACCES"
	tests := []struct {
		op, name string
		readOnly bool
		want     syscall.Errno
		audit    string // the code and errno of the one audit line; "" for none
	}{
		{"create", hidden, false, syscall.EACCES, escape},
		{"mknod", hidden, false, syscall.EACCES, escape},
		{"mkdir", hidden, false, syscall.EACCES, escape},
		{"symlink", hidden, false, syscall.EACCES, escape},
		{"link", hidden, false, syscall.EACCES, escape},
		{"rename to", hidden, false, syscall.EACCES, escape},
		{"rename from", hidden, false, syscall.ENOENT, ""},
		{"exchange", hidden, false, syscall.ENOENT, ""},
		{"unlink", hidden, false, syscall.ENOENT, ""},
		{"rmdir", hidden, false, syscall.ENOENT, ""},

		// A host's credential is never replaced, moved or linked; a new
		// credential name is made (TestPrepareAllows).
		{"rename to", ".env", false, syscall.EACCES, cred},
		{"link from", ".env", false, syscall.EACCES, cred},
		{"rename from", ".env", false, syscall.EACCES, cred},
		{"exchange", ".env", false, syscall.EACCES, cred},

		// A protected path is made by no route.
		{"create", ".envrc", false, syscall.EACCES, protected},
		{"mknod", ".envrc", false, syscall.EACCES, protected},
		{"symlink", ".envrc", false, syscall.EACCES, protected},
		{"symlink", ".terraform.d", false, syscall.EACCES, protected},
		{"link", ".envrc", false, syscall.EACCES, protected},
		{"rename to", ".envrc", false, syscall.EACCES, protected},
		{"exchange", ".bashrc", false, syscall.EACCES, protected},

		{"create", "new.txt", true, syscall.EROFS, ""},
		{"mknod", "new.txt", true, syscall.EROFS, ""},
		{"mkdir", "new", true, syscall.EROFS, ""},
		{"symlink", "new.txt", true, syscall.EROFS, ""},
		{"link", "new.txt", true, syscall.EROFS, ""},
		{"rename to", "new.txt", true, syscall.EROFS, ""},
		{"unlink", "a.txt", true, syscall.EROFS, ""},
		{"rmdir", "d", true, syscall.EROFS, ""},
		// Read-only comes first: not even a hidden name is looked at.
		{"create", hidden, true, syscall.EROFS, ""},
		{"unlink", hidden, true, syscall.EROFS, ""},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.name+map[bool]string{true: " ro"}[tt.readOnly], func(t *testing.T) {
			tf := newTestFS(t, func(o *Options) { o.ReadOnly = tt.readOnly })
			tf.write(t, "a.txt", "A")
			tf.write(t, ".env", "SECRET")
			tf.write(t, ".bashrc", "alias ll='ls -l'")
			tf.write(t, hidden, "another owner's uncommitted bytes")
			if err := os.Mkdir(filepath.Join(tf.backing, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			before := tf.snapshot(t)
			got := nameOps[tt.op](tf, t, tt.name)
			if got != tt.want {
				t.Errorf("%s %q = %v, want %v", tt.op, tt.name, got, tt.want)
			}
			tf.wantUnchanged(t, before)
			if tt.audit == "" {
				tf.wantAudit(t)
			} else {
				tf.wantAudit(t, opName(tt.op)+" "+tt.audit)
			}
		})
	}
}

// opName is the audit op of a nameOps entry.
func opName(op string) string {
	switch op {
	case "rename to", "rename from", "exchange":
		return "rename"
	case "link from":
		return "link"
	}
	return op
}

// TestPrepareAllows: a credential may be removed, and a directory with a
// credential's name made (a policy may allow a file beneath it); what is
// made in it is judged as it is made: a new credential name is made
// through the mount, and reads back.
func TestPrepareAllows(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, ".env", "SECRET")
	if errno := nameOps["unlink"](tf, t, ".env"); errno != 0 {
		t.Errorf("unlink .env = %v, want success", errno)
	}
	if _, ok := tf.read(t, ".env"); ok {
		t.Error(".env still in the backing dir after unlink")
	}
	if errno := nameOps["mkdir"](tf, t, ".ssh"); errno != 0 {
		t.Fatalf("mkdir .ssh = %v, want success", errno)
	}
	ssh := tf.lookup(t, ".ssh")
	var out fuse.EntryOut
	_, fh, _, errno := ssh.Create(context.Background(), "id_ed25519", syscall.O_WRONLY|syscall.O_CREAT, 0o600, &out)
	if errno != 0 {
		t.Fatalf("create .ssh/id_ed25519 = %v, want success (made through the mount)", errno)
	}
	fileOf(fh).Release(context.Background())
	if _, ok := tf.read(t, ".ssh/id_ed25519"); !ok {
		t.Error(".ssh/id_ed25519 was not made")
	}
	for _, op := range []string{"mknod", "symlink", "link", "rename to"} {
		tf.write(t, "a.txt", "A")
		if errno := nameOps[op](tf, t, "id_rsa"); errno != 0 {
			t.Errorf("%s id_rsa = %v, want success (a new credential name)", op, errno)
		}
		if errno := nameOps["unlink"](tf, t, "id_rsa"); errno != 0 {
			t.Fatalf("unlink id_rsa: %v", errno)
		}
	}
	tf.wantAudit(t)
}

// selfOps are the operations on a node itself, as the kernel sends them.
var selfOps = map[string]func(n *Node) syscall.Errno{
	"truncate": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"setattr": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o600}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"getxattr": func(n *Node) syscall.Errno {
		_, errno := n.Getxattr(context.Background(), "user.x", make([]byte, 64))
		return errno
	},
	"setxattr": func(n *Node) syscall.Errno {
		return n.Setxattr(context.Background(), "user.x", []byte("1"), 0)
	},
	"removexattr": func(n *Node) syscall.Errno {
		return n.Removexattr(context.Background(), "user.x")
	},
	"listxattr": func(n *Node) syscall.Errno {
		_, errno := n.Listxattr(context.Background(), make([]byte, 256))
		return errno
	},
}

// TestPrepareSelfRefusals: an operation on a node itself refuses in one
// order too: read-only first, then an object swapped since lookup
// (PATH_ESCAPE, even for a credential: escapes come first), then the
// credential (CREDENTIAL_PATH_DENIED; not for a chmod, which only changes
// metadata). The backing dir is left as it was.
func TestPrepareSelfRefusals(t *testing.T) {
	const escape, cred = "PATH_ESCAPE EACCES", "CREDENTIAL_PATH_DENIED EACCES"
	tests := []struct {
		op       string
		readOnly bool
		swap     bool // .env is replaced by a symlink after lookup
		want     syscall.Errno
		audit    string
	}{
		{"truncate", false, false, syscall.EACCES, cred},
		{"getxattr", false, false, syscall.EACCES, cred},
		{"setxattr", false, false, syscall.EACCES, cred},
		{"removexattr", false, false, syscall.EACCES, cred},
		{"listxattr", false, false, syscall.EACCES, cred},

		{"truncate", false, true, syscall.EACCES, escape},
		{"setattr", false, true, syscall.EACCES, escape},
		{"getxattr", false, true, syscall.EACCES, escape},
		{"setxattr", false, true, syscall.EACCES, escape},
		{"removexattr", false, true, syscall.EACCES, escape},
		{"listxattr", false, true, syscall.EACCES, escape},

		{"truncate", true, true, syscall.EROFS, ""},
		{"setattr", true, true, syscall.EROFS, ""},
		{"setxattr", true, true, syscall.EROFS, ""},
		{"removexattr", true, true, syscall.EROFS, ""},
	}
	for _, tt := range tests {
		name := tt.op + map[bool]string{true: " swapped"}[tt.swap] + map[bool]string{true: " ro"}[tt.readOnly]
		t.Run(name, func(t *testing.T) {
			tf := newTestFS(t, func(o *Options) { o.ReadOnly = tt.readOnly })
			tf.write(t, ".env", "SECRET")
			n := tf.lookup(t, ".env")
			if tt.swap {
				p := filepath.Join(tf.backing, ".env")
				if err := os.Rename(p, p+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(".env.real", p); err != nil {
					t.Fatal(err)
				}
			}
			before := tf.snapshot(t)
			if got := selfOps[tt.op](n); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.op, got, tt.want)
			}
			tf.wantUnchanged(t, before)
			if tt.audit == "" {
				tf.wantAudit(t)
			} else {
				tf.wantAudit(t, tt.op+" "+tt.audit)
			}
		})
	}
}
