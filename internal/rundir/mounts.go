package rundir

import (
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// fsType is the file system type the kernel gives realmfs's mounts.
const fsType = "fuse.realmfs"

// Mounts are the realmfs mounts of mountinfo, oldest first.
func Mounts() ([]*mountinfo.Info, error) {
	return mountinfo.GetMounts(mountinfo.FSTypeFilter(fsType))
}

// MountAt is the newest mount at mnt (an absolute path, symlinks
// resolved); ok reports whether it is realmfs's.
func MountAt(mnt string) (m *mountinfo.Info, ok bool, err error) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(mnt))
	if err != nil || len(mounts) == 0 {
		return nil, false, err
	}
	m = mounts[len(mounts)-1]
	return m, m.FSType == fsType, nil
}

// Device is m's device number, the name of its socket and record.
func Device(m *mountinfo.Info) uint64 {
	return unix.Mkdev(uint32(m.Major), uint32(m.Minor))
}
