package writeengine

import (
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/diskroom"
)

// OrdersRenamedData reports whether the filesystem under the backing root
// (rootFd) writes a file's data to disk before a rename of it over another
// file does: ext4 with a journal and its default options. Its
// auto_da_alloc starts the renamed file's writeback at the rename, and
// data=ordered (or =journal) holds the rename's journal commit until that
// data is written, so after a power loss the name holds the old file or the
// whole new one. Without a journal (mkfs.ext4 -O ^has_journal) nothing
// orders them. A commit that replaces an empty file relies on it instead
// of an fsync of its temp (syncPlan); on any other filesystem, or where
// this cannot be told, the temp is fsynced as every other one.
func OrdersRenamedData(rootFd int) bool {
	var sfs unix.Statfs_t
	if dirfd.Fstatfs(rootFd, &sfs) != nil || sfs.Type != unix.EXT4_SUPER_MAGIC {
		return false
	}
	id, ok, err := dirfd.MountID(rootFd)
	if err != nil || !ok {
		return false
	}
	mounts, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return uint64(i.ID) != id, uint64(i.ID) == id
	})
	if err != nil || len(mounts) != 1 || mounts[0].FSType != "ext4" {
		return false
	}
	m := mounts[0]
	return ext4OrdersRenames(m.VFSOptions) && ext4Journaled(m.Major, m.Minor)
}

// ext4Journaled reports whether the ext4 filesystem on block device
// major:minor has a journal: its jbd2 thread is named in
// /sys/fs/ext4/DEV/journal_task ("<none>" without one). A missing file
// (an older kernel, no sysfs) counts as no journal.
func ext4Journaled(major, minor int) bool {
	task, err := diskroom.Ext4Attr(uint32(major), uint32(minor), "journal_task")
	return err == nil && journalTaskNamed(task)
}

// journalTaskNamed reports whether a journal_task file names a thread.
func journalTaskNamed(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && s != "<none>"
}

// ext4OrdersRenames reports whether an ext4 superblock mounted with
// superOpts (mountinfo's super options, which list what differs from the
// defaults) keeps both halves of the ordering: auto_da_alloc, and data
// written before the metadata that names it.
func ext4OrdersRenames(superOpts string) bool {
	for _, o := range strings.Split(superOpts, ",") {
		if o == "noauto_da_alloc" || o == "data=writeback" {
			return false
		}
	}
	return true
}
