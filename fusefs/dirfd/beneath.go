package dirfd

import (
	"fmt"
	"strings"
)

// WalkParent opens, beneath the directory root holds, the directory that
// holds the last name of rel, a workspace path ("src/a.go"), and returns
// its O_PATH fd (the caller's to close) and that last name. It walks rel
// one name at a time, each step an OpenDir of a single name from the fd
// of the step before, as the node tree reaches a directory: no symlink is
// followed, no mount crossed, and "", ".", ".." or a name holding NUL is
// refused as ErrEscape. A path, not a node, is what a record of the
// journal holds: its recovery and its undo reach an object this way.
func WalkParent(root int, rel string) (dir int, name string, err error) {
	names := strings.Split(rel, "/")
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return -1, "", fmt.Errorf("path %q: %w", rel, err)
		}
	}
	dir, err = Dup(root)
	if err != nil {
		return -1, "", err
	}
	for _, n := range names[:len(names)-1] {
		next, err := OpenDir(dir, n)
		Close(dir)
		if err != nil {
			return -1, "", err
		}
		dir = next
	}
	return dir, names[len(names)-1], nil
}
