package guard

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// maxRenameScan bounds the subtree a directory rename inspects. A larger
// tree is refused: realm cannot tell it holds no credential, nor no link
// that would climb out.
const maxRenameScan = 200000

// errStop ends a walk early.
var errStop = errors.New("walk stopped")

// walk visits every entry beneath the directory held by dir, depth first,
// without following symlinks; visit gets the entry's path (prefix/...), the
// fd of the directory holding it, and the entry, and returns false to stop
// (walk then returns a non-nil error). A directory prune reports (nil:
// none) is visited but not entered.
func walk(dir int, prefix string, visit func(rel string, parent int, d dirfd.Dirent) bool, prune func(name string) bool) error {
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
		if !isDir || prune != nil && prune(d.Name) {
			continue
		}
		sub, err := dirfd.OpenDir(dir, d.Name)
		if err != nil {
			continue // gone or swapped since listed: nothing to visit there
		}
		err = walk(sub, rel, visit, prune)
		dirfd.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// RenameFinding is what a directory rename's scan found against the move.
type RenameFinding struct {
	// Path is the first credential found (its path now) or protected path
	// (its path after the move); "" if none.
	Path string
	// Protected says Path is a protected path after the move, not a
	// credential.
	Protected bool
	// Unscanned: the tree could not be scanned whole (too large, or a
	// directory could not be read); nothing found means nothing then.
	Unscanned bool
}

// scanDirRename judges the move of the directory held by fd from rel to
// newRel, workspace paths, by what it holds: a credential (under the new
// name the file could match no glob: ".aws" renamed to "x" would release
// x/credentials; files made through the mount are no credentials), or
// anything whose path after the move is protected (mkdir m/docker, write
// m/docker/config.json, mv m/docker m/.docker), or a symlink whose path
// after the move is a protected prefix. skip names the entries the mount
// does not show (its temps), which are neither judged nor counted out.
// The caller holds the names beneath still (FS.nsMu exclusively) from the
// scan through the rename.
func (g *Guard) scanDirRename(fd int, rel, newRel string, skip func(name string) bool) RenameFinding {
	seen := 0
	var f RenameFinding
	err := walk(fd, rel, func(p string, parent int, d dirfd.Dirent) bool {
		seen++
		if skip(d.Name) {
			return seen < maxRenameScan
		}
		after := newRel + p[len(rel):]
		switch {
		case g.Denied(p) && !g.madeEntry(parent, d.Name):
			f.Path = p
		case g.Protected(after), d.Type == unix.DT_LNK && g.ProtectedPrefix(after):
			f.Path, f.Protected = after, true
		}
		return f.Path == "" && seen < maxRenameScan
	}, nil)
	if f.Path == "" && (err != nil || seen >= maxRenameScan) {
		f.Unscanned = true
	}
	return f
}

// Scan walks the backing tree held by root once, at mount: it records the
// identity of every credential file (for its other names: hard links, bind
// mounts, the names it is renamed to) and protected file (scanEntry), and
// hands each hidden name (the mount's temps) to sweep, which removes it if
// a crash left it there and says so; a hidden directory (the journal's) is
// not entered. The identity checks (IDs.Has) wait
// until it is done (StartScan): it runs while the mount serves.
func (g *Guard) Scan(root int, hidden func(name string) bool, sweep func(dir int, name string) bool) ScanResult {
	var res ScanResult
	defer g.scanDone()
	res.Err = walk(root, "", func(rel string, parent int, d dirfd.Dirent) bool {
		res.Entries++
		g.scanEntries.Add(1)
		if hidden(d.Name) {
			if sweep(parent, d.Name) {
				res.TempRemoved++
			}
			return true
		}
		if d.Type != unix.DT_DIR {
			g.Creds.Meet(d.Ino)
			if g.scanEntry(parent, d.Name, rel) {
				res.Credentials++
			}
		}
		return true
	}, hidden)
	if res.Err == nil {
		g.Creds.DropUnmet()
	}
	return res
}

// ScanResult is what the mount-time scan found.
type ScanResult struct {
	Entries     int
	Credentials int
	TempRemoved int
	Err         error
}
