package guard

import (
	"errors"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Symlinks are judged by where they resolve, on the mount and in BACKING
// for the host, not by their text alone. A target resolved component by
// component follows every link it meets, and a ".." after a link climbs
// from the link's target, not from the link's name: `d/up/..` with
// `d/up -> ..` is BACKING's parent, though it reads as `d`. So the mount
// keeps one rule that makes resolution provable without resolving
// anything: every target is *normal*, its ".." components (any number)
// before its names, and climbs no higher than the directory holding the
// link is deep. Then by induction on the links met, no resolution leaves
// the root: a normal target climbs from the link's real directory to one
// of its real ancestors, inside, then only descends, into a directory or
// through another link that lands inside by the same rule. The rule is
// checked where a link gets a place (symlink, a hard link of a link, a
// rename of a link or of a directory holding links to a shallower place)
// and at every readlink on the mount, so a link the host made that breaks
// it is not followed either. A symlink being made is judged by it among
// the other steps of a name's admission (admit.go: JudgeSymlink).

// StaysInside reports whether target, the target of a symlink in a
// directory depth levels below the root, is normal and climbs no higher
// than the root. An absolute target is an escape: on the mount the kernel
// would resolve it in the caller's namespace, outside the workspace.
func StaysInside(depth int, target string) bool {
	ups, ok := targetUps(target)
	return ok && depth >= 0 && ups <= depth
}

// targetUps is the number of ".." components of a normal target (its
// ".." components all before its names; "" and "." components, from "//"
// or "./", count for nothing); ok is false for a target that is absolute,
// empty or not normal.
func targetUps(target string) (ups int, ok bool) {
	if target == "" || strings.HasPrefix(target, "/") {
		return 0, false
	}
	named := false
	for c := range strings.SplitSeq(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return 0, false
			}
			ups++
		default:
			named = true
		}
	}
	return ups, true
}

// LexicalTarget is the workspace-relative path a symlink in dir (itself
// workspace-relative) points at. The target has passed StaysInside, so the
// result does not climb above the root, and is where the link resolves.
func LexicalTarget(dir, target string) string {
	p := path.Clean(path.Join("/", dir, target))
	return strings.TrimPrefix(p, "/")
}

// PathDepth is the number of names in the workspace path rel: the depth of
// the directory rel names, below the root ("").
func PathDepth(rel string) int {
	if rel == "" {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

// linkEscapingBeneath finds a symlink beneath the directory held by fd
// that would climb out of the root were the directory depth levels below
// it: escaping is its path below the directory, "" if none; scanned is
// false when the tree could not be read whole (a directory moved
// shallower is then refused, as realm cannot tell).
func linkEscapingBeneath(fd, depth int) (escaping string, scanned bool) {
	seen := 0
	err := walk(fd, "", func(rel string, parent int, d dirfd.Dirent) bool {
		seen++
		if d.Type == unix.DT_LNK || d.Type == unix.DT_UNKNOWN {
			lfd, err := dirfd.OpenPath(parent, d.Name)
			if err == nil {
				target, err := dirfd.Readlink(lfd)
				if err == nil && !StaysInside(depth+strings.Count(rel, "/"), target) {
					escaping = rel
				}
				dirfd.Close(lfd)
			}
		}
		return escaping == "" && seen < maxRenameScan
	}, nil)
	return escaping, escaping != "" || (err == nil && seen < maxRenameScan)
}

// maxLinks bounds the links one resolution follows, as the kernel's 40.
const maxLinks = 40

// ResolvesInside reports whether target, the target of a symlink made in
// the directory dir (a workspace path, as the kernel has it now), resolves
// beneath the root held by root as the host's kernel would follow it in
// BACKING: component by component from the root, through every link it
// meets, each of which must itself be normal and climb no higher than its
// directory is deep (a link the host made may not be: `hd/hx ->
// ../../etc`, so a new `x -> hd/hx` would lead out on the host, though on
// the mount the kernel meets hx's readlink and is refused). The walk ends
// inside at a name that is not there or not a directory (the text's own
// climb was judged by StaysInside), and at a loop, which resolves to
// nothing; it ends outside at a directory another filesystem is mounted
// on.
func ResolvesInside(root int, dir, target string) bool {
	w := resolveWalk{root: root}
	defer w.close()
	for c := range strings.SplitSeq(dir, "/") {
		if c != "" && w.enter(c) != nil {
			return true // the directory moved meanwhile: nothing to judge by
		}
	}
	pending := pathNames(target)
	for links := 0; len(pending) > 0; {
		c := pending[0]
		pending = pending[1:]
		if c == ".." {
			if !w.up() {
				return false
			}
			continue
		}
		var st unix.Stat_t
		if dirfd.Lstat(w.cur(), c, &st) != nil {
			return true
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			if err := w.enter(c); err != nil {
				return !errors.Is(err, dirfd.ErrEscape) // another filesystem mounted there is outside
			}
		case syscall.S_IFLNK:
			if links++; links > maxLinks {
				return true
			}
			next, ok := w.readlink(c)
			if !ok {
				return false
			}
			pending = append(pathNames(next), pending...)
		default:
			return true
		}
	}
	return true
}

// pathNames is p's components without "" and ".".
func pathNames(p string) []string {
	var names []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			names = append(names, c)
		}
	}
	return names
}

// resolveWalk is ResolvesInside's place: the O_PATH fds of the
// directories from the root down to where it is.
type resolveWalk struct {
	root int
	fds  []int
}

func (w *resolveWalk) cur() int {
	if len(w.fds) == 0 {
		return w.root
	}
	return w.fds[len(w.fds)-1]
}

// enter steps into the directory name (dirfd.ErrEscape: a mount point).
func (w *resolveWalk) enter(name string) error {
	fd, err := dirfd.OpenDir(w.cur(), name)
	if err != nil {
		return err
	}
	w.fds = append(w.fds, fd)
	return nil
}

// up steps to the parent; false above the root.
func (w *resolveWalk) up() bool {
	if len(w.fds) == 0 {
		return false
	}
	dirfd.Close(w.fds[len(w.fds)-1])
	w.fds = w.fds[:len(w.fds)-1]
	return true
}

// readlink is the target of the link name where the walk is, if it is
// normal and climbs no higher than the walk is deep.
func (w *resolveWalk) readlink(name string) (string, bool) {
	fd, err := dirfd.OpenPath(w.cur(), name)
	if err != nil {
		return "", false
	}
	defer dirfd.Close(fd)
	target, err := dirfd.Readlink(fd)
	return target, err == nil && StaysInside(len(w.fds), target)
}

func (w *resolveWalk) close() {
	for _, fd := range w.fds {
		dirfd.Close(fd)
	}
}

// TargetHidden reports whether a symlink target names a hidden name in any
// component.
func TargetHidden(target string, hidden func(name string) bool) bool {
	for c := range strings.SplitSeq(target, "/") {
		if hidden(c) {
			return true
		}
	}
	return false
}
