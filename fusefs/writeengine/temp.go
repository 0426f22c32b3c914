package writeengine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
)

// Temps: the hidden siblings (TempPrefix) that hold an owner's new content
// until its commit renames one over the file, and the registry of those
// this engine is using, which the mount-time sweep (fusefs/admit:
// Gate.Scan) spares.

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
func (w *Write[N]) ensureTemp(ctx context.Context, seed bool) error {
	if w.temp >= 0 {
		return nil
	}
	w.catchUp() // copy the file there now, not one another owner's commit replaced
	g := w.eng
	name := g.NewTempName()
	fd, err := dirfd.Open(w.tempDir, name, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		g.TempMade(name, false)
		return err
	}
	fail := func(err error) error {
		dirfd.Close(fd)
		dirfd.Unlink(w.tempDir, name, 0)
		g.TempMade(name, false)
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
		// A copy takes the file's blocks anew (a reflink none: counted all
		// the same, as the gauge cannot tell beforehand).
		if errno := g.take(ctx, st.Blocks*512, w.place); errno != 0 {
			return fail(errno)
		}
		if err := dirfd.CloneOrCopy(fd, w.base, -1); err != nil {
			return fail(err)
		}
	}
	if g.cfg.AsRoot {
		if err := chownTemp(fd, &st); err != nil {
			return fail(err)
		}
	}
	mode := guard.HostFileMode(st.Mode & 07777)
	if err := dirfd.Chmod(fd, mode); err != nil {
		return fail(err)
	}
	// New content never keeps a privilege; every other attribute it
	// cannot keep (a label a daemon that is not root may not set) is named
	// by the commit that makes the temp the file (Write.xattrsLost).
	w.xattrsLost = dirfd.CopyXattrs(fd, w.base, "security.capability")
	w.temp, w.tempName = fd, name
	w.m.TempMade()
	return nil
}

// chownTemp gives the temp fd the owner of the file of st, where it has
// another: a chown is a change (ext4 starts a transaction of its journal
// for it), a stat is not, and a temp the daemon made mostly has the
// file's owner already (a daemon running as the files' owner).
func chownTemp(fd int, st *unix.Stat_t) error {
	var tst unix.Stat_t
	if err := dirfd.Fstat(fd, &tst); err != nil {
		return err
	}
	if tst.Uid == st.Uid && tst.Gid == st.Gid {
		return nil
	}
	return dirfd.Chown(fd, int(st.Uid), int(st.Gid))
}

// tempName is a new temp's name: the prefix and 16 random hex digits.
func (g *Engine[N]) tempName() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return cmp.Or(g.cfg.TempPrefix, TempPrefix) + hex.EncodeToString(rnd[:])
}

// dropTemp removes the temp and forgets its changes; an unpublished
// file's temp is the file, which ends with it (vanish).
func (w *Write[N]) dropTemp() {
	if w.temp >= 0 {
		dirfd.Close(w.temp)
		dirfd.Unlink(w.tempDir, w.tempName, 0)
		w.eng.TempMade(w.tempName, false)
	}
	w.temp, w.tempName = -1, ""
	w.m.TempGone()
	w.vanish()
}

// TempMade records that this engine made (live) or no longer has the temp
// name: the engine calls it for each of its temps; a test of the sweep,
// for a name it plays a live temp with.
func (g *Engine[N]) TempMade(name string, live bool) {
	g.tempsMu.Lock()
	defer g.tempsMu.Unlock()
	if !live {
		delete(g.temps, name)
		return
	}
	if g.temps == nil {
		g.temps = make(map[string]bool)
	}
	g.temps[name] = true
}

// IsOwnTemp reports whether name is a temp this engine is using: the
// mount-time sweep, which removes the temps a crash left, spares it.
func (g *Engine[N]) IsOwnTemp(name string) bool {
	g.tempsMu.Lock()
	defer g.tempsMu.Unlock()
	return g.temps[name]
}
