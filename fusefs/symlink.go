package fusefs

import "strings"

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
