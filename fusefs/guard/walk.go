package guard

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// MaxRenameScan bounds the subtree a directory rename inspects. A larger
// tree is refused: realm cannot tell it holds no credential, nor no link
// that would climb out.
const MaxRenameScan = 200000

// errStop ends a walk early.
var errStop = errors.New("walk stopped")

// Walk visits every entry beneath the directory held by dir, depth first,
// without following symlinks; visit gets the entry's path (prefix/...), the
// fd of the directory holding it, and the entry, and returns false to stop
// (Walk then returns a non-nil error).
func Walk(dir int, prefix string, visit func(rel string, parent int, d dirfd.Dirent) bool) error {
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
		err = Walk(sub, rel, visit)
		dirfd.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}
