package fusefs

import (
	"context"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/guard"
)

// Symlinks are judged by where they resolve (fusefs/guard's symlink.go
// says the rule: every target normal, climbing no higher than its
// directory is deep); what is here refuses what the rule does not let
// through.

// staysInside reports whether target, the target of a symlink in a
// directory depth levels below the root, is normal and climbs no higher
// than the root (guard.StaysInside).
func staysInside(depth int, target string) bool { return guard.StaysInside(depth, target) }

// lexicalTarget is the workspace-relative path a symlink in dir points at
// (guard.LexicalTarget).
func lexicalTarget(dir, target string) string { return guard.LexicalTarget(dir, target) }

// pathDepth is the number of names in the workspace path rel.
func pathDepth(rel string) int { return guard.PathDepth(rel) }

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

// resolvesInside reports whether target, the target of a symlink made in
// the directory dir (a workspace path), resolves beneath the root as the
// host's kernel would follow it in BACKING (guard.ResolvesInside).
func (f *FS) resolvesInside(dir, target string) bool {
	return guard.ResolvesInside(f.rootFd, dir, target)
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

// denyLinksBeneath refuses moving the directory name in dir (held by pfd)
// to a place depth levels below the root when a symlink beneath it would
// then climb out (guard.LinkEscapingBeneath), or when its tree cannot be
// read whole.
func (f *FS) denyLinksBeneath(ctx context.Context, dir *Node, pfd int, name string, depth int) syscall.Errno {
	fd, err := dirfd.OpenDir(pfd, name)
	if isEscape(err) {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeResolve)
	}
	if err != nil {
		return toErrno(err)
	}
	defer dirfd.Close(fd)
	escaping, scanned := guard.LinkEscapingBeneath(fd, depth)
	if escaping != "" {
		return f.refuse(ctx, "rename", dir, path.Join(name, escaping), errcode.PathEscape, RuleEscapeSymlinkTarget)
	}
	if !scanned {
		return f.refuse(ctx, "rename", dir, name, errcode.PathEscape, RuleEscapeUnscanned)
	}
	return 0
}
