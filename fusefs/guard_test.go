package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// credOps are the operations on a node itself that read or change a
// credential, each as the kernel would send it.
var credOps = map[string]func(n *Node) syscall.Errno{
	"open": func(n *Node) syscall.Errno {
		fh, _, errno := n.Open(context.Background(), syscall.O_RDONLY)
		if fh != nil {
			fileOf(fh).Release(context.Background())
		}
		return errno
	},
	"chmod": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o666}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"chown": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_UID | fuse.FATTR_GID, Owner: fuse.Owner{Uid: 1000, Gid: 1000}}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"utimens": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MTIME | fuse.FATTR_MTIME_NOW | fuse.FATTR_ATIME | fuse.FATTR_ATIME_NOW}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"truncate": func(n *Node) syscall.Errno {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: 0}}
		return n.Setattr(context.Background(), nil, in, &fuse.AttrOut{})
	},
	"setxattr": func(n *Node) syscall.Errno {
		return n.Setxattr(context.Background(), "user.x", []byte("1"), 0)
	},
}

// metaOf is what a refused change must leave as it was: mode, owner,
// times (the ctime shows any change at all), size and content.
func metaOf(t *testing.T, tf *testFS, name string) string {
	t.Helper()
	st := backingStat(t, tf, name)
	data, _ := tf.read(t, name)
	return fmt.Sprintf("ino %d mode %o uid %d gid %d mtime %v ctime %v size %d %q",
		st.Ino, st.Mode, st.Uid, st.Gid, st.Mtim, st.Ctim, st.Size, data)
}

// wantRefused runs every credOp on n and wants each refused, with one
// audit line "op-as-audited CREDENTIAL_PATH_DENIED EACCES", and the
// backing file name unchanged.
func wantRefused(t *testing.T, tf *testFS, n *Node, name string) {
	t.Helper()
	audited := map[string]string{"chmod": "setattr", "chown": "setattr", "utimens": "setattr", "truncate": "truncate"}
	before := metaOf(t, tf, name)
	for op, do := range credOps {
		tf.audit.reset()
		if errno := do(n); errno != syscall.EACCES {
			t.Errorf("%s of %s: %v, want EACCES", op, name, errno)
		}
		as := audited[op]
		if as == "" {
			as = op
		}
		tf.wantAudit(t, as+" CREDENTIAL_PATH_DENIED EACCES")
	}
	if after := metaOf(t, tf, name); after != before {
		t.Errorf("%s changed by refused operations:\nbefore %s\nafter  %s", name, before, after)
	}
}

// TestCredentialIdentityAnyLinkCount: once lookup has seen a credential by
// its name, the file is refused under an innocent hard link's name (every
// read and change) also after the credential's name is removed through
// the mount, when the file has one link left. Getattr stays allowed.
func TestCredentialIdentityAnyLinkCount(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, ".env", "SECRET=1\n")
	tf.lookup(t, ".env")
	if err := os.Link(filepath.Join(tf.backing, ".env"), filepath.Join(tf.backing, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if errno := tf.root.Unlink(context.Background(), ".env"); errno != 0 {
		t.Fatalf("unlink .env: %v (removing a credential's name is allowed)", errno)
	}
	tf.root.RmChild(".env") // as the bridge does after UNLINK
	if st := backingStat(t, tf, "notes.txt"); st.Nlink != 1 {
		t.Fatalf("notes.txt has %d links, want 1", st.Nlink)
	}
	n := tf.lookup(t, "notes.txt")
	wantRefused(t, tf, n, "notes.txt")
	var out fuse.AttrOut
	if errno := n.Getattr(context.Background(), nil, &out); errno != 0 || out.Size != uint64(len("SECRET=1\n")) {
		t.Errorf("getattr notes.txt: %v, size %d; stat of a credential must work", errno, out.Size)
	}
}

// TestCredentialSetattrRefused: chmod, chown and utimensat of a credential
// by its name are refused and audited; the same changes of an innocent
// file are made.
func TestCredentialSetattrRefused(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, ".env", "SECRET=1\n")
	wantRefused(t, tf, tf.lookup(t, ".env"), ".env")

	tf.write(t, "plain.txt", "innocent\n")
	n := tf.lookup(t, "plain.txt")
	tf.audit.reset()
	for _, op := range []string{"chmod", "utimens"} {
		if errno := credOps[op](n); errno != 0 {
			t.Errorf("%s of plain.txt: %v", op, errno)
		}
	}
	if st := backingStat(t, tf, "plain.txt"); st.Mode&0o7777 != 0o666 {
		t.Errorf("plain.txt mode %o after chmod 666", st.Mode&0o7777)
	}
	tf.wantAudit(t)
}

// TestCredentialRecycledInode: a new file that the backing filesystem gives
// a deleted credential's inode number is not a credential: the identity
// includes the generation (birth time).
func TestCredentialRecycledInode(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, ".env", "SECRET=1\n")
	cred := tf.lookup(t, ".env")
	old := cred.FileID()
	if old.Gen == 0 {
		t.Skip("the backing filesystem reports no birth time: a recycled number is refused, by design")
	}
	if err := os.Remove(filepath.Join(tf.backing, ".env")); err != nil {
		t.Fatal(err)
	}
	tf.root.RmChild(".env")
	// ext4 hands the lowest free number in the group to the next new file,
	// once the transaction that freed it is committed: sync, then try a few
	// names.
	unix.Syncfs(tf.rootFd)
	for i := range 64 {
		name := fmt.Sprintf("fresh%d.txt", i)
		tf.write(t, name, "fresh\n")
		if st := backingStat(t, tf, name); st.Ino != old.Key.Ino {
			continue
		}
		n := tf.lookup(t, name)
		if id := n.FileID(); id.Key != old.Key || id.Gen == old.Gen {
			t.Fatalf("%s: identity %+v, credential was %+v: want the same number, another generation", name, id, old)
		}
		tf.audit.reset()
		if errno := credOps["open"](n); errno != 0 {
			t.Errorf("open %s (a new file with a deleted credential's inode number): %v", name, errno)
		}
		tf.wantAudit(t)
		return
	}
	var sfs unix.Statfs_t
	unix.Statfs(tf.backing, &sfs)
	t.Skipf("the backing filesystem (type %#x) did not reuse inode %d in 64 new files", sfs.Type, old.Key.Ino)
}

// reset forgets the audit lines written so far.
func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
