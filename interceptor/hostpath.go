package interceptor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
)

// maxSymlinks is the kernel's bound on symlinks followed in one lookup
// (MAXSYMLINKS, 40).
const maxSymlinks = 40

// procSuperMagic is PROC_SUPER_MAGIC, the f_type of a procfs mount.
const procSuperMagic = 0x9fa0

// errProc is a host path in procfs: /proc/<pid>/root, cwd, fd/N and the
// like are magic links that lead anywhere on the host (and resolving them
// here would follow the interceptor's own process, not the sandbox
// driver's), and /proc itself holds them all. No sandbox has a reason to
// bind one.
var errProc = errors.New("it is in procfs, whose magic links (/proc/<pid>/root, cwd, fd) lead anywhere on the host")

// canonical resolves a host path the way the kernel walks it when the
// driver binds it: "." and ".." component by component, each symlink
// replaced by its target (relative ones against the directory holding
// them), at most maxSymlinks of them. Where a component does not exist the
// rest is kept as cleaned text. A path that reaches procfs, by name or
// through a link, is errProc; it is checked before each component is
// looked at, so no magic link is ever followed.
func canonical(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute host path", p)
	}
	cur := "/"
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if inProc(next) {
			return "", errProc
		}
		st, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return path.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", next, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if onProcfs(next) {
				return "", errProc
			}
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("resolve %s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", next, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}

// inProc reports whether p is /proc or beneath it, by name.
func inProc(p string) bool { return under(p, "/proc") }

// onProcfs reports whether p (which exists and is no symlink) is on a
// procfs mount, wherever that is mounted.
func onProcfs(p string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(p, &st) == nil && st.Type == procSuperMagic
}

// fileID is what names a directory on the host whatever path reaches it: a
// bind mount of the workspace elsewhere has the workspace's identity.
type fileID struct{ dev, ino uint64 }

func idOf(p string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(p, &st) != nil {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// guarded is what no sandbox may bind but the one realm sandbox its own
// mount: realm's state dir and every session's workspace and mountpoint
// (BACKING and the way to it), canonical.
type guarded struct {
	paths []guardedPath
	// self maps the identity of each guarded path to it; within maps the
	// identity of each guarded path and of every directory above it to the
	// guarded path it leads to.
	self, within map[fileID]string
	// mounts are the host's mounts, as the interceptor sees them.
	mounts []*mountinfo.Info
}

type guardedPath struct {
	path, what string
	// in is where path lies in its file system: the device of the mount
	// that holds it and the path from that file system's root.
	in fsPath
}

// fsPath is a place in a file system regardless of where it is mounted:
// mountinfo's major:minor and the path within (mountinfo's root, joined
// with the rest of the path below the mountpoint). Two bind mounts of one
// directory have the same fsPath.
type fsPath struct {
	major, minor int
	path         string
}

// overlaps reports whether a and b are the same place, or one is inside
// the other.
func (a fsPath) overlaps(b fsPath) bool {
	return a.major == b.major && a.minor == b.minor && (under(a.path, b.path) || under(b.path, a.path))
}

// mountOf returns where the canonical path c lies in its file system: the
// topmost mount whose mountpoint is c or the nearest above it.
func mountOf(mounts []*mountinfo.Info, c string) (fsPath, bool) {
	var best *mountinfo.Info
	for _, m := range mounts {
		if under(c, m.Mountpoint) && (best == nil || len(m.Mountpoint) >= len(best.Mountpoint)) {
			best = m
		}
	}
	if best == nil {
		return fsPath{}, false
	}
	rel := strings.TrimPrefix(c, best.Mountpoint)
	return fsPath{best.Major, best.Minor, path.Join(best.Root, "/"+rel)}, true
}

func newGuarded(stateDir string, workspaces []string) (*guarded, error) {
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read the host's mounts: %w", err)
	}
	g := &guarded{self: map[fileID]string{}, within: map[fileID]string{}, mounts: mounts}
	add := func(p, what string) error {
		c, err := canonical(p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, p, err)
		}
		in, _ := mountOf(mounts, c)
		g.paths = append(g.paths, guardedPath{c, what, in})
		if id, ok := idOf(c); ok {
			g.self[id] = c
		}
		for d := c; ; d = path.Dir(d) {
			if id, ok := idOf(d); ok {
				if _, dup := g.within[id]; !dup {
					g.within[id] = c
				}
			}
			if d == "/" {
				return nil
			}
		}
	}
	if stateDir != "" {
		if err := add(stateDir, "realm's state dir"); err != nil {
			return nil, err
		}
	}
	for _, w := range workspaces {
		if err := add(w, "a realm workspace"); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// check says why a sandbox may not bind src, or "" if it may. src is
// canonicalised first; then it may not be, contain, or lie inside a guarded
// path: by name; by identity (another path to the same directory, e.g. a
// bind mount of the workspace elsewhere on the host); by the place in its
// file system (a bind mount of a directory inside the workspace); nor may
// it hold a mount that shows a guarded path (the driver's bind is
// recursive, rbind, and takes the mounts beneath the source along).
func (g *guarded) check(src string) string {
	why := g.checkPath(src)
	if why != "" {
		return why
	}
	c, _ := canonical(src) // checkPath vouched for it
	if in, ok := mountOf(g.mounts, c); ok {
		for _, p := range g.paths {
			if in.overlaps(p.in) {
				return fmt.Sprintf("%s is, holds or lies inside %s %s, mounted there from another path", src, p.what, p.path)
			}
		}
	}
	for _, m := range g.mounts {
		if m.Mountpoint == c || !under(m.Mountpoint, c) {
			continue
		}
		sub := fsPath{m.Major, m.Minor, m.Root}
		for _, p := range g.paths {
			if sub.overlaps(p.in) {
				return fmt.Sprintf("%s holds the mount %s, which shows %s %s", src, m.Mountpoint, p.what, p.path)
			}
		}
	}
	return ""
}

// checkPath is check by name and by identity.
func (g *guarded) checkPath(src string) string {
	c, err := canonical(src)
	if err != nil {
		return fmt.Sprintf("%s cannot be vouched for: %v", src, err)
	}
	shown := src
	if c != path.Clean(src) {
		shown = fmt.Sprintf("%s (resolved: %s)", src, c)
	}
	for _, p := range g.paths {
		switch {
		case c == p.path:
			return fmt.Sprintf("%s is %s", shown, p.what)
		case under(p.path, c):
			return fmt.Sprintf("%s contains %s %s", shown, p.what, p.path)
		case under(c, p.path):
			return fmt.Sprintf("%s is inside %s %s", shown, p.what, p.path)
		}
	}
	if id, ok := idOf(c); ok {
		if p, hit := g.within[id]; hit {
			return fmt.Sprintf("%s is the same directory as %s, or one above it", shown, p)
		}
	}
	for d := path.Dir(c); ; d = path.Dir(d) {
		if id, ok := idOf(d); ok {
			if p, hit := g.self[id]; hit {
				return fmt.Sprintf("%s is inside %s (reached as %s)", shown, p, d)
			}
		}
		if d == "/" {
			return ""
		}
	}
}
