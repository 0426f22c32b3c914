package admit

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
	"github.com/realm-dev/realm/fusefs/templive"
)

// Scan walks the backing tree once at mount (guard.Guard.Scan): it records
// the identity of every credential and protected file, and removes the
// temp files of atomic writes that a crash left behind (every temp this
// mount is not using: IsOwnTemp; conflict copies are never touched). It
// runs while the mount serves (fusefs's FS.ScanInBackground); what could
// meet a crash's temp before the walk reaches it sweeps that directory
// itself (SweepBeforeRmdir).
func (g *Gate) Scan() guard.ScanResult {
	return g.Guard.Scan(g.RootFd, g.Hidden, g.removeCrashTemp)
}

// removeCrashTemp removes the temp name in the directory held by dir if a
// crash left it: a regular file, not one this mount is using nor one of
// another daemon of BACKING that lives (templive.Orphaned: another mount
// of it, on this host or a node sharing it). A read-only mount removes
// nothing: it writes nothing in BACKING.
func (g *Gate) removeCrashTemp(dir int, name string) bool {
	var st unix.Stat_t
	return !g.ReadOnly && !g.IsOwnTemp(name) && templive.Orphaned(g.RootFd, name) && dirfd.Lstat(dir, name, &st) == nil &&
		st.Mode&syscall.S_IFMT == syscall.S_IFREG && dirfd.Unlink(dir, name, 0) == nil
}

// SweepBeforeRmdir removes the temps a crash left in directory name of the
// directory held by pfd, while the mount-time sweep may not have reached
// it: an rmdir of a directory that looks empty on the mount must not fail
// ENOTEMPTY on a hidden name the sweep is about to remove. It reports
// whether it removed any.
func (g *Gate) SweepBeforeRmdir(pfd int, name string) bool {
	select {
	case <-g.Guard.Scanned():
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
		if g.Hidden(d.Name) && g.removeCrashTemp(fd, d.Name) {
			removed = true
		}
	}
	return removed
}
