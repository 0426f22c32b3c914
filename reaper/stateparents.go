package reaper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkParents refuses a state dir reached through a directory another
// user could change. realmctl reaches its records, mounts and lock by
// path, so whoever may rename entries in any directory on the way (a
// parent owned by them, or writable by them and not sticky) could swap
// the checked state dir for one of their own after the check, with a
// planted symlink in it. Every directory on the way, as given and as its
// symlinks resolve, must therefore be root's or the effective uid's and
// writable by no one else unless sticky (as /tmp is: there nobody else
// may rename or remove an entry they do not own). Symlinks on the way
// must be root's or the effective uid's. A directory not made yet is
// not checked: LockStateDir makes it (0700, its own) and checks again.
// This is what OpenSSH's StrictModes asks of a user's ~/.ssh.
func checkParents(dir string, euid uint32) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	if err := checkPath(abs, euid); err != nil {
		return err
	}
	real, err := resolveExisting(abs)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	if real == abs {
		return nil
	}
	return checkPath(real, euid)
}

// checkPath checks each existing parent of abs, from the root down, by
// what lstat says of it.
func checkPath(abs string, euid uint32) error {
	var parents []string
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		parents = append(parents, p)
		if p == "/" {
			break
		}
	}
	for i := len(parents) - 1; i >= 0; i-- {
		p := parents[i]
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("state dir's parent %s: %w", p, err)
		}
		if err := checkParent(p, &st, euid); err != nil {
			return err
		}
	}
	return nil
}

// checkParent judges one directory or symlink on the way to a state dir.
func checkParent(p string, st *unix.Stat_t, euid uint32) error {
	if st.Uid != 0 && st.Uid != euid {
		return unsafeDir(p, "is on the state dir's path and owned by uid %d, not by root or uid %d (this realmctl), who could swap what lies beneath it; use a state dir of your own (--state-dir)", st.Uid, euid)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return unsafeDir(p, "is on the state dir's path and writable by its group or others without the sticky bit (mode %04o), so they could swap what lies beneath it; chmod go-w it", st.Mode&0o7777)
	}
	return nil
}

// resolveExisting is abs with the symlinks of its longest existing
// prefix resolved, and the rest (not made yet) as given.
func resolveExisting(abs string) (string, error) {
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}
