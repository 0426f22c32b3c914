// Package templive tells the temps a live realmfs daemon is writing from
// those a crash left, across every daemon of one BACKING: two mounts of it
// on one host, or mounts on several nodes over shared storage (the CSI
// driver's reader nodes). Each daemon that writes claims an instance, a
// random name it gives its temps, and holds an flock on the instance's
// mark, BACKING/.realm-tmp-live/<instance>, for its life; the kernel drops
// the lock when the daemon dies, however it dies. A sweep of crash temps
// removes a temp only when no one holds its instance's mark: another
// daemon's write in progress keeps its uncommitted bytes.
//
// The mount hides every name that starts with Prefix, the marks'
// directory among them; a .gitignore of "*" in it keeps git status in
// BACKING quiet on the host.
package templive

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Prefix starts every temp's name and every mark's (writeengine.TempPrefix).
const Prefix = ".realm-tmp-"

// Dir is the marks' directory in BACKING's root.
const Dir = Prefix + "live"

// instanceLen is an instance's length: 8 random bytes in hex.
const instanceLen = 16

// Mark is a daemon's claim on its instance: its mark, locked while the
// daemon lives.
type Mark struct {
	fd   int
	inst string
}

// Claim makes a new instance's mark in BACKING's root (root) and locks
// it, and removes the marks of daemons gone. Between the making and the
// lock, another daemon's claim may take the mark for a dead one's and
// remove it: a mark is then made anew, under another instance.
func Claim(root int) (*Mark, error) {
	dir, err := openDir(root, true)
	if err != nil {
		return nil, fmt.Errorf("temps' mark: %w", err)
	}
	defer dirfd.Close(dir)
	removeDead(dir)
	for range 3 {
		var rnd [instanceLen / 2]byte
		rand.Read(rnd[:])
		inst := hex.EncodeToString(rnd[:])
		fd, err := dirfd.Open(dir, inst, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("temps' mark: %w", err)
		}
		if err := dirfd.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			dirfd.Close(fd)
			dirfd.Unlink(dir, inst, 0)
			return nil, fmt.Errorf("temps' mark: locking it: %w", err)
		}
		var held, named unix.Stat_t
		if dirfd.Fstat(fd, &held) == nil && dirfd.Lstat(dir, inst, &named) == nil &&
			held.Dev == named.Dev && held.Ino == named.Ino {
			return &Mark{fd: fd, inst: inst}, nil
		}
		dirfd.Close(fd)
	}
	return nil, errors.New("temps' mark: removed as it was made, three times over")
}

// openDir opens the marks' directory, made (0700, with its .gitignore)
// where it is not and create is set.
func openDir(root int, create bool) (int, error) {
	if create {
		if err := dirfd.Mkdir(root, Dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
	}
	dir, err := dirfd.OpenDir(root, Dir)
	if err != nil || !create {
		return dir, err
	}
	if fd, err := dirfd.Open(dir, ".gitignore", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644); err == nil {
		f := os.NewFile(uintptr(fd), ".gitignore")
		f.WriteString("*\n")
		f.Close()
	}
	return dir, nil
}

// removeDead removes the marks in dir no daemon holds.
func removeDead(dir int) {
	ents, err := dirfd.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if isInstance(e.Name) && !held(dir, e.Name) {
			dirfd.Unlink(dir, e.Name, 0)
		}
	}
}

// TempPrefix starts the names of the temps of m's daemon ("" for no mark).
func (m *Mark) TempPrefix() string {
	if m == nil {
		return ""
	}
	return Prefix + m.inst + "-"
}

// Release removes m's mark (root: BACKING's root) and lets go of its lock:
// the daemon's temps are a crash's from here on.
func (m *Mark) Release(root int) error {
	dir, err := openDir(root, false)
	if err == nil {
		err = dirfd.Unlink(dir, m.inst, 0)
		dirfd.Close(dir)
	}
	return errors.Join(err, dirfd.Close(m.fd))
}

// isInstance reports whether name is an instance: instanceLen hex digits.
func isInstance(name string) bool {
	_, err := hex.DecodeString(name)
	return len(name) == instanceLen && err == nil
}

// instanceOf is the instance a temp named name belongs to; false for a
// name of none (a temp of a daemon before instances, or undo's).
func instanceOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok || len(rest) <= instanceLen || rest[instanceLen] != '-' || !isInstance(rest[:instanceLen]) {
		return "", false
	}
	return rest[:instanceLen], true
}

// Orphaned reports whether the temp name (found anywhere in BACKING,
// whose root root holds) was left by a daemon that is gone: its
// instance's mark is missing or no one holds its lock. A name of no
// instance is a crash's, as every temp was before instances. An answer
// that cannot be had keeps the temp (false).
func Orphaned(root int, name string) bool {
	inst, ok := instanceOf(name)
	if !ok {
		return true
	}
	dir, err := openDir(root, false)
	if errors.Is(err, unix.ENOENT) {
		return true
	}
	if err != nil {
		return false
	}
	defer dirfd.Close(dir)
	return !held(dir, inst)
}

// held reports whether a daemon holds the mark inst in dir; a mark that is
// not there is held by none, one that cannot be probed is taken as held.
func held(dir int, inst string) bool {
	fd, err := dirfd.Open(dir, inst, unix.O_RDONLY, 0)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		return true
	}
	defer dirfd.Close(fd)
	// A probe's own lock, on its own open of the mark, goes with the close.
	return dirfd.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}
