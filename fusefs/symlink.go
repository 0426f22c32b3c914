package fusefs

import (
	"path"
	"strings"
)

// staysInside reports whether a symlink target, resolved lexically from a
// directory depth levels below the root, stays beneath the root. An
// absolute target is an escape: on the mount the kernel would resolve it in
// the caller's namespace, outside the workspace. Every symlink the kernel
// meets on the mount passes through Readlink, so a chain of links is checked
// link by link.
func staysInside(depth int, target string) bool {
	if depth < 0 || target == "" || strings.HasPrefix(target, "/") {
		return false
	}
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return false
			}
		default:
			depth++
		}
	}
	return true
}

// lexicalTarget is the workspace-relative path a symlink in dir (itself
// workspace-relative) points at, resolved lexically. The target has passed
// staysInside, so the result does not climb above the root.
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
