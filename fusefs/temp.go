package fusefs

import (
	"crypto/rand"
	"encoding/hex"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Temps: the hidden siblings (TempPrefix) that hold an owner's new content
// until its commit renames one over the file, and the registry of those
// this mount is using, which the mount-time sweep (FS.Scan) spares.

// ensureTemp makes the temp the owner writes into, seeded with the current
// content unless seed is false (O_TRUNC), for a change by a process of uid
// writer. A failure (ENOSPC, say) leaves nothing behind and the file
// untouched.
//
// A change of content drops privileges, as the kernel leaves to the daemon
// (HANDLE_KILLPRIV_V2, which spares a GETXATTR of security.capability per
// write): the temp never carries the file's capabilities nor its set-ID
// bits, whoever writes (hostmode.go: new content with the host's privilege
// would be the writer's program running with it).
func (w *pendingWrite) ensureTemp(seed bool) error {
	if w.temp >= 0 {
		return nil
	}
	w.catchUp() // copy the file there now, not one another owner's commit replaced
	var rnd [8]byte
	rand.Read(rnd[:])
	name := TempPrefix + hex.EncodeToString(rnd[:])
	f := w.node.fsys
	f.tempMade(name, true)
	fd, err := dirfd.Open(w.tempDir, name, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		f.tempMade(name, false)
		return err
	}
	// The daemon's own changes to the temp (its owner, mode, content)
	// need no invalidation: the watcher's kernel queue is spared them.
	quiet := f.watch != nil && f.watch.quiet(fd)
	fail := func(err error) error {
		dirfd.Close(fd)
		dirfd.Unlink(w.tempDir, name, 0)
		f.tempMade(name, false)
		return err
	}
	// The temp becomes the file: give it the file's content (unless the
	// write truncates it, or it is empty, as every newly created file is;
	// a reflink, or a copy of its data extents that keeps its holes, so a
	// write into a large sparse file costs its data, not its size),
	// owner, mode and extended attributes (as they are now, with this
	// mount's own changes) before anyone can see it under the file's name.
	// A change to the file after this fstat is caught by the commit, which
	// compares the file with what was observed when the lock was taken.
	var st unix.Stat_t
	if err := dirfd.Fstat(w.base, &st); err != nil {
		return fail(err)
	}
	if seed && st.Size > 0 {
		if err := dirfd.CloneOrCopy(fd, w.base, -1); err != nil {
			return fail(err)
		}
	}
	if f.asRoot {
		if err := dirfd.Chown(fd, int(st.Uid), int(st.Gid)); err != nil {
			return fail(err)
		}
	}
	mode := hostFileMode(st.Mode & 07777)
	if err := dirfd.Chmod(fd, mode); err != nil {
		return fail(err)
	}
	// New content never keeps a privilege; every other attribute it
	// cannot keep (a label a daemon that is not root may not set) is named
	// by the commit that makes the temp the file (pendingWrite.xattrsLost).
	w.xattrsLost = dirfd.CopyXattrs(fd, w.base, "security.capability")
	w.temp, w.tempName, w.mode, w.tempQuiet = fd, name, mode, quiet
	w.m.TempMade()
	return nil
}

// unquiet has the watcher see the temp's changes again, before the temp
// becomes a file under a name the host may change.
func (w *pendingWrite) unquiet() {
	if w.tempQuiet {
		w.node.fsys.watch.unquiet(w.temp)
		w.tempQuiet = false
	}
}

// dropTemp removes the temp and forgets its changes.
func (w *pendingWrite) dropTemp() {
	if w.temp >= 0 {
		dirfd.Close(w.temp)
		dirfd.Unlink(w.tempDir, w.tempName, 0)
		w.node.fsys.tempMade(w.tempName, false)
	}
	w.temp, w.tempName, w.tempQuiet = -1, "", false
	w.m.TempGone()
}

// tempMade records that this mount made (or no longer has) the temp name.
func (f *FS) tempMade(name string, live bool) {
	f.tempsMu.Lock()
	defer f.tempsMu.Unlock()
	if !live {
		delete(f.temps, name)
		return
	}
	if f.temps == nil {
		f.temps = make(map[string]bool)
	}
	f.temps[name] = true
}

// isOwnTemp reports whether name is a temp this mount is using.
func (f *FS) isOwnTemp(name string) bool {
	f.tempsMu.Lock()
	defer f.tempsMu.Unlock()
	return f.temps[name]
}
