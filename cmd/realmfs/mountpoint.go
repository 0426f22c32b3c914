package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// checkMountpoint refuses the mountpoints that would hide or loop:
//   - BACKING itself, or a directory inside it: the daemon's own walks of
//     BACKING would enter the mount and wait on themselves, and the host's
//     view of the workspace would vanish under the guard's;
//   - a directory that is already a mount point (a second realmfs on the
//     same place, stacked silently) or that is not empty (its files would be
//     hidden while mounted), unless -o nonempty says that is meant, as with
//     bindfs and libfuse 2.
//
// Both paths are absolute. Symlinks are resolved, so a link to BACKING is
// BACKING.
func checkMountpoint(backing, mountpoint string, nonempty bool) error {
	b, err := filepath.EvalSymlinks(backing)
	if err != nil {
		return fmt.Errorf("backing directory: %w", err)
	}
	m, err := filepath.EvalSymlinks(mountpoint)
	if err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	}
	if m == b {
		return fmt.Errorf("mountpoint %s is the backing directory: mount the guard at another directory", mountpoint)
	}
	if strings.HasPrefix(m, b+"/") || b == "/" {
		return fmt.Errorf("mountpoint %s is inside the backing directory %s: the guard would serve its own mount; mount it outside BACKING", mountpoint, backing)
	}
	if nonempty {
		return nil
	}
	if isMount, err := isMountPoint(m); err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	} else if isMount {
		return fmt.Errorf("mountpoint %s is already a mount point (another realmfs?); unmount it first, or pass -o nonempty to mount over it", mountpoint)
	}
	if empty, err := isEmptyDir(m); err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	} else if !empty {
		return fmt.Errorf("mountpoint %s is not empty: its files would be hidden while mounted; pass -o nonempty if that is meant", mountpoint)
	}
	return nil
}

// checkOutside refuses a file of the daemon's (its audit log, its own log,
// its policy) inside BACKING: a process on the mount could remove the
// audit trail, write lines into the log, or change the rules it is held to
// (they would be ordinary files of the workspace). files maps each file's
// role to its absolute path; "" is no file. A name that does not exist yet
// is judged by its nearest existing ancestor, symlinks resolved, so a link
// into BACKING is inside.
func checkOutside(backing string, files map[string]string) error {
	b, err := filepath.EvalSymlinks(backing)
	if err != nil {
		return fmt.Errorf("backing directory: %w", err)
	}
	for _, role := range []string{"audit log", "log", "policy file", "state directory", "journal directory"} {
		p := files[role]
		if p == "" {
			continue
		}
		real, err := resolveExisting(p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", role, p, err)
		}
		if real == b || strings.HasPrefix(real, b+"/") || b == "/" {
			return fmt.Errorf("%s %s is inside the backing directory %s: a process on the mount could change or remove it; put it outside BACKING", role, p, backing)
		}
	}
	return nil
}

// resolveExisting is p with symlinks resolved as far as p exists: its
// nearest existing ancestor resolved, and the rest of p appended.
func resolveExisting(p string) (string, error) {
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// stateNone is --state-dir's value for remembering nothing across mounts.
const stateNone = "none"

// madeStorePath is the file that keeps BACKING's set of files made through
// the mount, in the state directory dir ("" for the default; stateNone:
// none). One file per BACKING, named by a hash of its real path. A default
// directory that lies inside BACKING (BACKING is a home directory, say) is
// no place for it: a process on the mount could mark a host's secret as
// made there. Then nothing is remembered.
func madeStorePath(dir, backing string) string {
	if dir == stateNone {
		return ""
	}
	if dir == "" {
		dir = defaultStateDir()
		if dir == "" || checkOutside(backing, map[string]string{"state directory": dir}) != nil {
			return ""
		}
	}
	real, err := filepath.EvalSymlinks(backing)
	if err != nil {
		real = backing
	}
	sum := sha256.Sum256([]byte(real))
	return filepath.Join(dir, "made-"+hex.EncodeToString(sum[:8])+".json")
}

// defaultStateDir is /var/lib/realmfs for root, else
// $XDG_STATE_HOME/realmfs ($HOME/.local/state/realmfs); "" if unknown.
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/realmfs"
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "realmfs")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "realmfs")
	}
	return ""
}

// mountDevice returns the device number of the newest mount at dir, as
// /proc/self/mountinfo lists it (no request reaches the mount itself).
func mountDevice(dir string) (uint64, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil {
		return 0, err
	}
	if len(mounts) == 0 {
		return 0, fmt.Errorf("%s: not in /proc/self/mountinfo", dir)
	}
	m := mounts[len(mounts)-1]
	return unix.Mkdev(uint32(m.Major), uint32(m.Minor)), nil
}

// isMountPoint reports whether dir is the root of a mount: statx's
// STATX_ATTR_MOUNT_ROOT (Linux 5.8), which also sees a bind mount of the
// same filesystem; before that, a device differing from the parent's.
func isMountPoint(dir string) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var parent unix.Stat_t
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return uint64(parent.Dev) != unix.Mkdev(stx.Dev_major, stx.Dev_minor), nil
}

func isEmptyDir(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	_, err = d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// sdNotify sends state to systemd when it started the daemon with
// Type=notify (NOTIFY_SOCKET set); otherwise it does nothing. A failure is
// not fatal: systemd then times the unit out and says so.
func sdNotify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	conn.Write([]byte(state))
}
