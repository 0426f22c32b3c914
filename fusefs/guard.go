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

// denyPath refuses op on name in dir, or on dir itself when name is "", if
// it is a credential: by its path, and for dir itself also by its identity
// (credential). Every check of an operation on a node (open, truncate,
// setattr, xattrs, link, copy_file_range) comes here.
func (f *FS) denyPath(ctx context.Context, op string, dir *Node, name string) syscall.Errno {
	rel := f.relPath(dir, name)
	if f.credentialDenied(rel) || name == "" && f.opts.Credentials != nil && f.creds.has(dir.fileID()) {
		return f.refuseCredential(ctx, op, rel, rel)
	}
	return 0
}

// hiding reports whether denied entries vanish from lookup and listings.
func (f *FS) hiding() bool {
	return f.opts.Credentials != nil && f.opts.Credentials.Hide()
}

// credInodes remembers the identity of every credential file the mount has
// seen by a denied name: a scan of the backing tree at mount, then every
// lookup. A file whose identity is here is a credential under any name it
// has or gets, whatever its link count: a hard link made outside the mount
// to ~/.ssh/id_rsa under an innocent name is refused, and stays refused
// after the credential's own name is removed or renamed, through the mount
// or in BACKING, and so is the same file seen through a bind mount.
//
// The identity is the file's (dev, ino) and its generation (birth time,
// dirfd.Statx), the fileID nodes carry: a deleted credential's inode number
// given to a new file does not make that file a credential. Where the
// backing filesystem has no birth time the generation is 0 for every file,
// and a new file with a recycled number is refused (closed, not open).
// Entries are never dropped: a credential's identity cannot stop being one.
type credInodes struct {
	mu      sync.RWMutex
	set     map[fileID]struct{}
	scanned chan struct{} // closed when the mount-time scan has finished
}

func (c *credInodes) add(id fileID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = make(map[fileID]struct{})
	}
	c.set[id] = struct{}{}
}

// has waits for the mount-time scan, then looks the identity up: one map
// lookup, no system call. Every name of a file may be the credential's, so
// every check waits for the scan, not only that of a multiply-linked file (a
// bind mount shows one file, with one link, under two names).
func (c *credInodes) has(id fileID) bool {
	if c.scanned != nil {
		<-c.scanned
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.set[id]
	return ok
}

// denyOpen is the credential check of an open, after the fd is verified:
// by path and by identity. The fd's stat is the identity n stands for
// (verify), which denyPath reads from n with its generation, so the check
// costs no system call.
func (n *Node) denyOpen(ctx context.Context, op string, _ *unix.Stat_t) syscall.Errno {
	return n.fsys.denyPath(ctx, op, n, "")
}

// noteLookup records a credential file's identity (st's dev and ino, and
// gen, its generation) as lookup finds it, and says whether the entry must
// be hidden.
//
// The workspace path is built only when the answer can matter: for a
// regular file (its identity may need recording) or when denied entries are
// hidden. Lookup is the hottest operation of the mount.
func (f *FS) noteLookup(dir *Node, name string, st *unix.Stat_t, gen uint64) (rel string, hide bool) {
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if f.opts.Credentials == nil || !(regular || f.hiding()) {
		return "", false
	}
	rel = f.relPath(dir, name)
	if !f.credentialDenied(rel) {
		return rel, false
	}
	if regular {
		f.creds.add(fileID{keyOf(st), gen})
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
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve) // a mount point, or swapped
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
		return f.refuseCredential(ctx, "rename", found, found)
	}
	if err != nil || seen >= maxRenameScan {
		return f.refuseRel(ctx, "rename", rel, errcode.CredentialPathDenied, RuleCredentialUnscanned)
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

// ScanResult is what the mount-time scan found.
type ScanResult struct {
	Entries     int
	Credentials int
	TempRemoved int
	Err         error
}

// Scan walks the backing tree once at mount: it records the identity of
// every credential file (for its other names: hard links, bind mounts, the
// names it is renamed to), and removes the temp files of atomic writes that a
// crash left behind (every temp this mount is not using; conflict copies are
// never touched). Credential checks by identity (credInodes.has) wait until
// it is done. It runs while the mount serves (ScanInBackground); what could
// meet a crash's temp before the walk reaches it sweeps that directory
// itself (sweepBeforeRmdir).
func (f *FS) Scan() ScanResult {
	var res ScanResult
	defer close(f.creds.scanned)
	res.Err = walk(f.rootFd, "", func(rel string, parent int, d dirfd.Dirent) bool {
		res.Entries++
		if hiddenName(d.Name) {
			if f.removeCrashTemp(parent, d.Name) {
				res.TempRemoved++
			}
			return true
		}
		if f.opts.Credentials != nil && d.Type != unix.DT_DIR && f.credentialDenied(rel) {
			var st unix.Stat_t
			if gen, err := dirfd.Statx(parent, d.Name, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				f.creds.add(fileID{keyOf(&st), gen})
				res.Credentials++
			}
		}
		return true
	})
	return res
}

// ScanInBackground runs Scan on a goroutine of its own and hands report its
// result. Close waits for it: a daemon unmounted at once still removes
// every temp a crash left, and the walk never meets a closed root fd.
func (f *FS) ScanInBackground(report func(ScanResult)) {
	f.scanning.Add(1)
	go func() {
		defer f.scanning.Done()
		report(f.Scan())
	}()
}

// removeCrashTemp removes the temp name in the directory held by dir if a
// crash left it: a regular file, not one this mount is using.
func (f *FS) removeCrashTemp(dir int, name string) bool {
	var st unix.Stat_t
	return !f.isOwnTemp(name) && dirfd.Lstat(dir, name, &st) == nil &&
		st.Mode&syscall.S_IFMT == syscall.S_IFREG && dirfd.Unlink(dir, name, 0) == nil
}

// sweepBeforeRmdir removes the temps a crash left in directory name of the
// directory held by pfd, while the mount-time sweep may not have reached
// it: an rmdir of a directory that looks empty on the mount must not fail
// ENOTEMPTY on a hidden name the sweep is about to remove. It reports
// whether it removed any.
func (f *FS) sweepBeforeRmdir(pfd int, name string) bool {
	select {
	case <-f.creds.scanned:
		return false // swept: a temp left is in use
	default:
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if err != nil {
		return false
	}
	defer dirfd.Close(fd)
	ents, err := dirfd.ReadDir(fd)
	if err != nil {
		return false
	}
	removed := false
	for _, d := range ents {
		if hiddenName(d.Name) && f.removeCrashTemp(fd, d.Name) {
			removed = true
		}
	}
	return removed
}
