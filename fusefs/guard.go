package fusefs

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"realm/errcode"
	"realm/fusefs/dirfd"
)

// Credential denial. The policy's matcher is asked about the canonical
// workspace-relative path of the object an operation touches: the node's
// own place in the tree, which for an object reached through a symlink is
// the symlink's target. Escape checks (dirfd, verify, staysInside) come
// first, so an escaping credential path reports PATH_ESCAPE.

// credentialDenied reports whether rel is a credential under the policy.
func (f *FS) credentialDenied(rel string) bool {
	return f.opts.Credentials != nil && f.opts.Credentials.Denied(rel)
}

// denyPath refuses op on name in dir (n itself when name is "") if its path
// is a credential.
func (f *FS) denyPath(ctx context.Context, op string, dir *Node, name string) syscall.Errno {
	rel := f.relPath(dir, name)
	if f.credentialDenied(rel) {
		return f.refuseRel(ctx, op, rel, errcode.CredentialPathDenied)
	}
	return 0
}

// hiding reports whether denied entries vanish from lookup and listings.
func (f *FS) hiding() bool {
	return f.opts.Credentials != nil && f.opts.Credentials.Hide()
}

// credInodes remembers the identity of every credential file the mount has
// seen by a denied name: a scan of the backing tree at mount, then every
// lookup. A regular file with more than one link whose identity is here is a
// credential under any name, so a hard link made outside the mount to
// ~/.ssh/id_rsa under an innocent name is still refused.
type credInodes struct {
	mu      sync.Mutex
	set     map[[2]uint64]struct{}
	scanned chan struct{} // closed when the mount-time scan has finished
}

func (c *credInodes) add(dev, ino uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = make(map[[2]uint64]struct{})
	}
	c.set[[2]uint64{dev, ino}] = struct{}{}
}

// has waits for the mount-time scan, then looks the identity up.
func (c *credInodes) has(dev, ino uint64) bool {
	if c.scanned != nil {
		<-c.scanned
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[[2]uint64{dev, ino}]
	return ok
}

// denyOpen is the credential check of an open, after the fd is verified:
// by path, and, for a file with other names, by identity.
func (n *Node) denyOpen(ctx context.Context, op string, st *unix.Stat_t) syscall.Errno {
	f := n.fsys
	if f.opts.Credentials == nil {
		return 0
	}
	rel := f.relPath(n, "")
	if f.credentialDenied(rel) || (st.Nlink > 1 && f.creds.has(st.Dev, st.Ino)) {
		return f.refuseRel(ctx, op, rel, errcode.CredentialPathDenied)
	}
	return 0
}

// noteLookup records a credential file's identity as lookup finds it, and
// says whether the entry must be hidden.
//
// The workspace path is built only when the answer can matter: for a
// regular file (its identity may need recording) or when denied entries are
// hidden. Lookup is the hottest operation of the mount.
func (f *FS) noteLookup(dir *Node, name string, st *unix.Stat_t) (rel string, hide bool) {
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if f.opts.Credentials == nil || !(regular || f.hiding()) {
		return "", false
	}
	rel = f.relPath(dir, name)
	if !f.credentialDenied(rel) {
		return rel, false
	}
	if regular {
		f.creds.add(st.Dev, st.Ino)
	}
	return rel, f.hiding()
}

// maxRenameScan bounds the subtree a directory rename inspects. A larger
// tree is refused: realm cannot tell it holds no credential.
const maxRenameScan = 200000

// denyDirRename refuses renaming a directory that holds a credential: under
// the new name the file could match no glob (".aws" renamed to "x" would
// release x/credentials). name is in dir, whose verified fd is pfd.
func (f *FS) denyDirRename(ctx context.Context, dir *Node, pfd int, name string) syscall.Errno {
	if f.opts.Credentials == nil {
		return 0
	}
	var st unix.Stat_t
	if err := dirfd.Lstat(pfd, name, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return 0
	}
	rel := f.relPath(dir, name)
	fd, err := dirfd.OpenDir(pfd, name)
	if isEscape(err) {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape) // a mount point, or swapped
	}
	if err != nil {
		return toErrno(err)
	}
	defer dirfd.Close(fd)
	seen := 0
	found := ""
	err = walk(fd, rel, func(p string, _ int, _ dirfd.Dirent) bool {
		seen++
		if f.credentialDenied(p) {
			found = p
		}
		return found == "" && seen < maxRenameScan
	})
	if found != "" {
		return f.refuseRel(ctx, "rename", found, errcode.CredentialPathDenied)
	}
	if err != nil || seen >= maxRenameScan {
		return f.refuseRel(ctx, "rename", rel, errcode.CredentialPathDenied)
	}
	return 0
}

// errStop ends a walk early.
var errStop = errors.New("walk stopped")

// walk visits every entry beneath the directory held by dir, depth first,
// without following symlinks; visit gets the entry's path (prefix/...), the
// fd of the directory holding it, and the entry, and returns false to stop.
func walk(dir int, prefix string, visit func(rel string, parent int, d dirfd.Dirent) bool) error {
	ents, err := dirfd.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, d := range ents {
		rel := d.Name
		if prefix != "" {
			rel = prefix + "/" + d.Name
		}
		if !visit(rel, dir, d) {
			return errStop
		}
		isDir := d.Type == unix.DT_DIR
		if d.Type == unix.DT_UNKNOWN {
			var st unix.Stat_t
			isDir = dirfd.Lstat(dir, d.Name, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
		}
		if !isDir {
			continue
		}
		sub, err := dirfd.OpenDir(dir, d.Name)
		if err != nil {
			continue // gone or swapped since listed: nothing to visit there
		}
		err = walk(sub, rel, visit)
		dirfd.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// scanResult is what the mount-time scan found.
type scanResult struct {
	Entries     int
	Credentials int
	TempRemoved int
	Err         error
}

// Scan walks the backing tree once at mount: it records the identity of
// every credential file (for hard links under other names), and removes the
// temp files of atomic writes that a crash left behind (every temp this
// mount is not using; conflict copies are never touched). Opens of files with
// several links wait until it is done.
func (f *FS) Scan() scanResult {
	var res scanResult
	defer close(f.creds.scanned)
	res.Err = walk(f.rootFd, "", func(rel string, parent int, d dirfd.Dirent) bool {
		res.Entries++
		if hiddenName(d.Name) {
			var st unix.Stat_t
			if !f.isOwnTemp(d.Name) && dirfd.Lstat(parent, d.Name, &st) == nil &&
				st.Mode&syscall.S_IFMT == syscall.S_IFREG && dirfd.Unlink(parent, d.Name, 0) == nil {
				res.TempRemoved++
			}
			return true
		}
		if f.opts.Credentials != nil && d.Type != unix.DT_DIR && f.credentialDenied(rel) {
			var st unix.Stat_t
			if dirfd.Lstat(parent, d.Name, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				f.creds.add(st.Dev, st.Ino)
				res.Credentials++
			}
		}
		return true
	})
	return res
}
