package reaper

import (
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
)

// fsType is the type realmfs mounts show in /proc/self/mountinfo.
const fsType = "fuse.realmfs"

// StateMounts is Mounts over the real mount table: the realmfs mounts whose
// mountpoints lie under Dir (the state dir). Mounts elsewhere, realmfs or
// not, are never touched.
type StateMounts struct {
	Dir string
}

// List implements Mounts from /proc/self/mountinfo. A mount stacked several
// times at one place is listed once per entry, so each is detached.
func (s StateMounts) List() ([]string, error) {
	root := filepath.Clean(s.Dir) + string(filepath.Separator)
	infos, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return i.FSType != fsType || !strings.HasPrefix(i.Mountpoint, root), false
	})
	if err != nil {
		return nil, err
	}
	var mnts []string
	for _, i := range infos {
		mnts = append(mnts, i.Mountpoint)
	}
	sort.Strings(mnts)
	return mnts, nil
}

// Unmount implements Mounts: umount2(MNT_DETACH), falling back to
// fusermount3 -uz when not allowed. Neither stats the mountpoint, so a dead
// daemon's "transport endpoint is not connected" cannot stop it.
func (s StateMounts) Unmount(mnt string) error {
	err := syscall.Unmount(mnt, syscall.MNT_DETACH)
	if err == nil || errors.Is(err, syscall.EINVAL) {
		return nil // EINVAL: no longer a mountpoint
	}
	if ferr := exec.Command("fusermount3", "-uz", mnt).Run(); ferr != nil {
		return err
	}
	return nil
}
