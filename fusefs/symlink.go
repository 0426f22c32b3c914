package fusefs

import (
	"context"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
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
// it is not followed either.

// staysInside reports whether target, the target of a symlink in a
// directory depth levels below the root, is normal and climbs no higher
// than the root. An absolute target is an escape: on the mount the kernel
// would resolve it in the caller's namespace, outside the workspace.
func staysInside(depth int, target string) bool {
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

// lexicalTarget is the workspace-relative path a symlink in dir (itself
// workspace-relative) points at. The target has passed staysInside, so the
// result does not climb above the root, and is where the link resolves.
func lexicalTarget(dir, target string) string {
	p := path.Clean(path.Join("/", dir, target))
	return strings.TrimPrefix(p, "/")
}

// targetHidden reports whether a symlink target names a hidden name (a
// live .realm-tmp- temp) in any component: such a link would reach, by a
// path the kernel resolves in BACKING's namespace, a file the mount says
// does not exist.
func targetHidden(target string) bool {
	for c := range strings.SplitSeq(target, "/") {
		if hiddenName(c) {
			return true
		}
	}
	return false
}

// denyLinkTarget refuses op when the symlink held by fd (an O_PATH fd of
// the verified link) would climb out of the root from a directory depth
// levels deep: a hard link of a symlink gives it a new directory to
// resolve from.
func (f *FS) denyLinkTarget(ctx context.Context, op string, dir *Node, name string, fd, depth int) syscall.Errno {
	target, err := dirfd.Readlink(fd)
	if err != nil {
		return toErrno(err)
	}
	if !staysInside(depth, target) {
		return f.refuse(ctx, op, dir, name, errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	return 0
}

// denyLinkMove refuses renaming name in dir (held by pfd) from oldRel to
// newRel (workspace paths, as the kernel has them now) when that would
// leave a symlink climbing out of the root: the object itself, if it is a
// link, or a link beneath it, if it is a directory moving to a shallower
// place (a link inside a directory moving deeper climbs less far than
// before). A tree too large to scan whole is refused too. The scan needs
// nsMu held exclusively, or a link could be made in the directory between
// the scan and the rename: without it, again says to come back with it.
func (f *FS) denyLinkMove(ctx context.Context, dir *Node, pfd int, name, oldRel, newRel string, exclusive bool) (_ syscall.Errno, again bool) {
	from, to := pathDepth(oldRel)-1, pathDepth(newRel)-1
	if from == to {
		return 0, false
	}
	var st unix.Stat_t
	if err := dirfd.Lstat(pfd, name, &st); err != nil {
		return 0, false // the rename itself will say what is wrong
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		fd, err := dirfd.OpenPath(pfd, name)
		if err != nil {
			return toErrno(err), false
		}
		defer dirfd.Close(fd)
		return f.denyLinkTarget(ctx, "rename", dir, name, fd, to), false
	case syscall.S_IFDIR:
		if to > from {
			return 0, false
		}
	default:
		return 0, false
	}
	if !exclusive {
		return 0, true
	}
	return f.denyLinksBeneath(ctx, dir, pfd, name, to+1), false
}

// pathDepth is the number of names in the workspace path rel: the depth of
// the directory rel names, below the root ("").
func pathDepth(rel string) int {
	if rel == "" {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

// denyLinksBeneath refuses moving the directory name in dir (held by pfd)
// to a place depth levels below the root when a symlink beneath it would
// then climb out.
func (f *FS) denyLinksBeneath(ctx context.Context, dir *Node, pfd int, name string, depth int) syscall.Errno {
	fd, err := dirfd.OpenDir(pfd, name)
	if isEscape(err) {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve)
	}
	if err != nil {
		return toErrno(err)
	}
	defer dirfd.Close(fd)
	seen, escaping := 0, ""
	err = walk(fd, "", func(rel string, parent int, d dirfd.Dirent) bool {
		seen++
		if d.Type == unix.DT_LNK || d.Type == unix.DT_UNKNOWN {
			lfd, err := dirfd.OpenPath(parent, d.Name)
			if err == nil {
				target, err := dirfd.Readlink(lfd)
				if err == nil && !staysInside(depth+strings.Count(rel, "/"), target) {
					escaping = rel
				}
				dirfd.Close(lfd)
			}
		}
		return escaping == "" && seen < maxRenameScan
	})
	if escaping != "" {
		return f.refuse(ctx, "rename", dir, path.Join(name, escaping), errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	if err != nil || seen >= maxRenameScan {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeUnscanned)
	}
	return 0
}

// maxLinks bounds the links one resolution follows, as the kernel's 40.
const maxLinks = 40

// resolvesInside reports whether target, the target of a symlink made in
// the directory dir (a workspace path, as the kernel has it now), resolves
// beneath the root as the host's kernel would follow it in BACKING:
// component by component from the root, through every link it meets, each
// of which must itself be normal and climb no higher than its directory is
// deep (a link the host made may not be: `hd/hx -> ../../etc`, so a new
// `x -> hd/hx` would lead out on the host, though on the mount the kernel
// meets hx's readlink and is refused). The walk ends inside at a name that
// is not there or not a directory (the text's own climb was judged by
// staysInside), and at a loop, which resolves to nothing; it ends outside
// at a directory another filesystem is mounted on.
func (f *FS) resolvesInside(dir, target string) bool {
	w := resolveWalk{f: f}
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
				return !isEscape(err) // another filesystem mounted there is outside
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

// resolveWalk is resolvesInside's place: the O_PATH fds of the
// directories from the root down to where it is.
type resolveWalk struct {
	f   *FS
	fds []int
}

func (w *resolveWalk) cur() int {
	if len(w.fds) == 0 {
		return w.f.rootFd
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
	return target, err == nil && staysInside(len(w.fds), target)
}

func (w *resolveWalk) close() {
	for _, fd := range w.fds {
		dirfd.Close(fd)
	}
}
