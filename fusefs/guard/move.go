package guard

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// A rename is judged by what it moves: the name itself by the checks of
// a name (NameDenied, Protected), and, here, what the move does to what
// lies beneath a directory or to where a symlink resolves from. A judgement
// that needs a scan of a tree (again) needs the names beneath held still
// from the scan through the rename (fusefs: nsMu held exclusively); the
// caller without that hold comes back with it.

// DirRename judges renaming name in the directory held by pfd from rel to
// newRel (workspace paths, as the kernel has them now) by the credential
// and protect rules: a symlink renamed to a protected prefix (its Path the
// new name, Protected), a directory by what it holds (scanDirRename). err
// is the open of the directory failing (dirfd.ErrEscape: a mount point,
// or swapped). Anything else, and a name gone, is for the name's own
// checks and the rename itself.
func (g *Guard) DirRename(pfd int, name, rel, newRel string, exclusive bool, skip func(name string) bool) (_ RenameFinding, again bool, err error) {
	if g.Policy == nil {
		return RenameFinding{}, false, nil
	}
	var st unix.Stat_t
	if dirfd.Lstat(pfd, name, &st) != nil {
		return RenameFinding{}, false, nil
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		if g.Policy.ProtectedPrefix(newRel) {
			return RenameFinding{Path: newRel, Protected: true}, false, nil
		}
		return RenameFinding{}, false, nil
	case syscall.S_IFDIR:
		if !exclusive {
			return RenameFinding{}, true, nil
		}
	default:
		return RenameFinding{}, false, nil
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if err != nil {
		return RenameFinding{}, false, err
	}
	defer dirfd.Close(fd)
	return g.scanDirRename(fd, rel, newRel, skip), false, nil
}

// LinkMove is what a rename does to the symlink rule (StaysInside).
type LinkMove struct {
	// Escapes: a link would climb out of the root from its new place;
	// Path is where it is below the name renamed ("" for the name itself).
	Escapes bool
	Path    string
	// Unscanned: a directory moved shallower whose tree could not be read
	// whole.
	Unscanned bool
	// Dir: the object is a directory (an error was its opening's).
	Dir bool
}

// LinkMoved judges renaming name in the directory held by pfd from oldRel
// to newRel (workspace paths, as the kernel has them now) by the symlink
// rule: the object itself, if it is a link, or a link beneath it, if it is
// a directory moving to a shallower place (a link inside a directory
// moving deeper climbs less far than before). A tree too large to scan
// whole is Unscanned. err is a system call failing on the object (for a
// directory, Dir, its opening: dirfd.ErrEscape, a mount point or swapped).
func LinkMoved(pfd int, name, oldRel, newRel string, exclusive bool) (_ LinkMove, again bool, err error) {
	from, to := PathDepth(oldRel)-1, PathDepth(newRel)-1
	if from == to {
		return LinkMove{}, false, nil
	}
	var st unix.Stat_t
	if dirfd.Lstat(pfd, name, &st) != nil {
		return LinkMove{}, false, nil // the rename itself will say what is wrong
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		ok, err := linkStaysInside(pfd, name, to)
		return LinkMove{Escapes: err == nil && !ok}, false, err
	case syscall.S_IFDIR:
		if to > from {
			return LinkMove{}, false, nil
		}
	default:
		return LinkMove{}, false, nil
	}
	if !exclusive {
		return LinkMove{}, true, nil
	}
	fd, err := dirfd.OpenDir(pfd, name)
	if err != nil {
		return LinkMove{Dir: true}, false, err
	}
	defer dirfd.Close(fd)
	escaping, scanned := linkEscapingBeneath(fd, to+1)
	return LinkMove{Escapes: escaping != "", Path: escaping, Unscanned: escaping == "" && !scanned, Dir: true}, false, nil
}

// linkStaysInside reports whether the symlink name in the directory held
// by pfd keeps the rule (StaysInside) from a directory depth levels deep.
func linkStaysInside(pfd int, name string, depth int) (bool, error) {
	fd, err := dirfd.OpenPath(pfd, name)
	if err != nil {
		return false, err
	}
	defer dirfd.Close(fd)
	return LinkFdStaysInside(fd, depth)
}

// LinkFdStaysInside is linkStaysInside of the link held by fd (an O_PATH
// fd of the verified link): a hard link of a symlink gives it a new
// directory to resolve from.
func LinkFdStaysInside(fd, depth int) (bool, error) {
	target, err := dirfd.Readlink(fd)
	if err != nil {
		return false, err
	}
	return StaysInside(depth, target), nil
}
