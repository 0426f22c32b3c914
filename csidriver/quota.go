package csidriver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// A volume's capacity is enforced where the base dir's file system has
// project quotas (ext4 with the quota and project features mounted with
// prjquota; XFS mounted with prjquota): the volume's directory gets a
// project id of its own, inherited by everything made in it
// (FS_XFLAG_PROJINHERIT), and the project a block limit of the capacity.
// A write past it fails: EDQUOT on ext4, ENOSPC on XFS (which answers a
// project's limit as a full disk). On ext4 a process with
// CAP_SYS_RESOURCE is not held to the hard limit, which is one of the
// capabilities realmfs's root daemon drops before it mounts; XFS holds
// root too (both seen in a VM on Linux 6.1). Elsewhere the capacity is
// recorded and reported only.
//
// golang.org/x/sys/unix (v0.50.0) has neither FS_IOC_FSGETXATTR nor struct
// fsxattr, nor a quotactl wrapper, its Q_* commands or struct if_dqblk:
// only the syscall numbers (SYS_QUOTACTL, SYS_QUOTACTL_FD). They are
// written out here from the kernel's UAPI headers (linux/fs.h,
// linux/quota.h, linux/dqblk_xfs.h); the values were checked against a C
// program printing them and the structs' sizes and offsets.
//
// Every quotactl is quotactl_fd(2) (Linux 5.14) on a directory of the
// file system, not quotactl(2) on its block device: the device named in
// mountinfo need not exist in the plugin's container's /dev, and an fd
// names the very file system the directory is on, mount namespaces and
// bind mounts notwithstanding.
const (
	// projectIDBase is the lowest project id a volume gets: ids below are
	// left to the node's own projects (/etc/projid), which count from 1.
	projectIDBase = 1 << 20

	// ioctls of linux/fs.h: _IOR('X', 31, struct fsxattr) and
	// _IOW('X', 32, struct fsxattr), in the generic encoding (x86, arm,
	// arm64, riscv; not mips, powerpc, sparc, which this plugin is not
	// built for).
	fsIocFSGetXattr    = 0x801c581f
	fsIocFSSetXattr    = 0x401c5820
	fsXflagProjInherit = 0x00000200

	// linux/quota.h: the quota type and commands, QCMD(cmd, type) is
	// cmd<<8 | type.
	prjQuota     = 2
	qGetQuota    = 0x800007
	qSetQuota    = 0x800008
	qifBLimits   = 1    // if_dqblk.dqb_valid: the block limits are set
	qifDqblkSize = 1024 // the unit of if_dqblk's block limits

	// linux/dqblk_xfs.h: Q_XGETQSTATV = XQM_CMD(8), asked of any file
	// system with quotas (the generic quota code answers it for ext4).
	qXGetQStatV      = 'X'<<8 | 8
	fsQStatVVersion1 = 1
	fsQuotaPDQAcct   = 0x10 // project quota usage accounted
	fsQuotaPDQEnfd   = 0x20 // project quota limits enforced
)

// fsxattr is struct fsxattr of linux/fs.h, 28 bytes.
type fsxattr struct {
	Xflags     uint32
	Extsize    uint32
	Nextents   uint32
	Projid     uint32
	Cowextsize uint32
	Pad        [8]byte
}

// ifDqblk is struct if_dqblk of linux/quota.h: eight __u64 then a __u32,
// padded to 72 bytes. The block limits are in qifDqblkSize units, the
// space used in bytes.
type ifDqblk struct {
	BHardLimit uint64
	BSoftLimit uint64
	CurSpace   uint64
	IHardLimit uint64
	ISoftLimit uint64
	CurInodes  uint64
	BTime      uint64
	ITime      uint64
	Valid      uint32
	_          uint32
}

// fsQuotaStatV is struct fs_quota_statv of linux/dqblk_xfs.h, 160 bytes:
// the version (in: FS_QSTATV_VERSION1), a pad byte, the FS_QUOTA_* flags;
// the rest (the quota files' and the timers' figures) is not read here.
type fsQuotaStatV struct {
	Version   int8
	_         uint8
	Flags     uint16
	IncoreDqs uint32
	_         [152]byte
}

func qcmd(cmd, typ uint32) uint32 { return cmd<<8 | typ&0xff }

// quotactlFd is quotactl_fd(fd, cmd, id, addr).
func quotactlFd(fd int, cmd, id uint32, addr unsafe.Pointer) error {
	if _, _, e := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), uintptr(cmd), uintptr(id), uintptr(addr), 0, 0); e != 0 {
		return e
	}
	return nil
}

// withDir runs f on an fd of the directory dir.
func withDir(dir string, f func(fd int) error) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return f(fd)
}

// projectQuotaEnforced reports nil where the file system of dir enforces
// project quota limits, else why not. It asks the kernel (Q_XGETQSTATV)
// rather than reading the mount options: the answer is the file system's
// state, for ext4 and XFS alike, and it tells limits enforced from usage
// only accounted (XFS pqnoenforce; ext4's quota feature without prjquota).
func projectQuotaEnforced(dir string) error {
	return withDir(dir, func(fd int) error {
		st := fsQuotaStatV{Version: fsQStatVVersion1}
		err := quotactlFd(fd, qcmd(qXGetQStatV, prjQuota), 0, unsafe.Pointer(&st))
		switch {
		case errors.Is(err, unix.ENOSYS):
			// The kernel's answer where no quota of any type is on (and
			// the syscall's where there is no quotactl_fd).
			return errors.New("no quota is on for this file system, or the kernel has no quotactl_fd (before 5.14)")
		case err != nil:
			return fmt.Errorf("quota state: %w", err)
		case st.Flags&fsQuotaPDQEnfd != 0:
			// Reading the state needs no privilege; reading or setting a
			// project's quota needs CAP_SYS_ADMIN. Without it every
			// CreateVolume with a capacity would fail: ask once here.
			// XFS answers ENOENT for a project it has no quota of yet.
			var q ifDqblk
			err := quotactlFd(fd, qcmd(qGetQuota, prjQuota), projectIDBase, unsafe.Pointer(&q))
			switch {
			case errors.Is(err, unix.EPERM):
				return errors.New("the file system enforces project quotas, but setting one needs CAP_SYS_ADMIN, which the plugin has not")
			case err != nil && !errors.Is(err, unix.ENOENT):
				return fmt.Errorf("quota of project %d: %w", projectIDBase, err)
			}
			return nil
		case st.Flags&fsQuotaPDQAcct != 0:
			return errors.New("project quota usage is accounted but limits are not enforced (mount it with prjquota)")
		}
		return errors.New("no project quota (ext4: tune2fs -O quota,project and mount -o prjquota; XFS: mount -o prjquota)")
	})
}

// projectOf is the project id of dir and whether it has the inherit flag.
func projectOf(dir string) (id uint32, inherit bool, err error) {
	var x fsxattr
	err = withDir(dir, func(fd int) error { return fsxattrIoctl(fd, fsIocFSGetXattr, &x) })
	if err != nil {
		return 0, false, fmt.Errorf("FS_IOC_FSGETXATTR %s: %w", dir, err)
	}
	return x.Projid, x.Xflags&fsXflagProjInherit != 0, nil
}

// setProject gives the directory dir the project id and the inherit flag,
// so that what is made in it is the project's too. What is in dir already
// keeps its project: CreateVolume sets it on the new, empty directory.
func setProject(dir string, id uint32) error {
	return withDir(dir, func(fd int) error {
		var x fsxattr
		if err := fsxattrIoctl(fd, fsIocFSGetXattr, &x); err != nil {
			return fmt.Errorf("FS_IOC_FSGETXATTR %s: %w", dir, err)
		}
		if x.Projid == id && x.Xflags&fsXflagProjInherit != 0 {
			return nil
		}
		x.Projid, x.Xflags = id, x.Xflags|fsXflagProjInherit
		if err := fsxattrIoctl(fd, fsIocFSSetXattr, &x); err != nil {
			return fmt.Errorf("FS_IOC_FSSETXATTR %s: project %d: %w", dir, id, err)
		}
		return nil
	})
}

func fsxattrIoctl(fd int, req uintptr, x *fsxattr) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(x))); e != 0 {
		return e
	}
	return nil
}

// setProjectLimit sets the block limit, hard and soft, of the project id
// of dir's file system to bytes (rounded up to the KiB the kernel counts
// limits in); 0 removes the limit.
func setProjectLimit(dir string, id uint32, bytes int64) error {
	kib := uint64((bytes + qifDqblkSize - 1) / qifDqblkSize)
	q := ifDqblk{BHardLimit: kib, BSoftLimit: kib, Valid: qifBLimits}
	return withDir(dir, func(fd int) error {
		if err := quotactlFd(fd, qcmd(qSetQuota, prjQuota), id, unsafe.Pointer(&q)); err != nil {
			return fmt.Errorf("set the limit of project %d: %w", id, err)
		}
		return nil
	})
}

// projectUsage is the block limit and the bytes used of the project id on
// dir's file system; the limit is 0 where none is set. XFS has no quota
// of a project with neither a limit nor usage (ENOENT): 0 and 0.
func projectUsage(dir string, id uint32) (limit, used int64, err error) {
	var q ifDqblk
	err = withDir(dir, func(fd int) error {
		return quotactlFd(fd, qcmd(qGetQuota, prjQuota), id, unsafe.Pointer(&q))
	})
	if errors.Is(err, unix.ENOENT) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("quota of project %d: %w", id, err)
	}
	return int64(q.BHardLimit) * qifDqblkSize, int64(q.CurSpace), nil
}

// lowestFreeProject is the lowest project id from projectIDBase that none
// of used is.
func lowestFreeProject(used []uint32) uint32 { return lowestFreeFrom(projectIDBase, used) }

// lowestFreeFrom is the lowest project id from base that none of used is.
func lowestFreeFrom(base uint32, used []uint32) uint32 {
	taken := make(map[uint32]bool, len(used))
	for _, id := range used {
		taken[id] = true
	}
	id := base
	for taken[id] {
		id++
	}
	return id
}

// allocProject is a project id for a new volume: the lowest no recorded
// volume holds. The caller holds ctrlMu, so no other allocation runs;
// a record not readable is passed over (its volume is not listed either).
func (d controllerServer) allocProject() (uint32, error) {
	ids, err := d.listRecords()
	if err != nil {
		return 0, err
	}
	var used []uint32
	for _, id := range ids {
		if r, err := d.readRecord(id); err == nil && r.ProjectID != 0 {
			used = append(used, r.ProjectID)
		}
	}
	return persistentProject(used)
}

// persistentProject is the lowest project id from projectIDBase none of
// used is, short of the ephemeral volumes' range.
func persistentProject(used []uint32) (uint32, error) {
	id := lowestFreeProject(used)
	if id >= ephemeralProjectBase {
		return 0, fmt.Errorf("all %d project ids of persistent volumes are taken", ephemeralProjectBase-projectIDBase)
	}
	return id, nil
}

// applyQuota gives the volume of r its project and r's capacity as the
// project's limit, allocating the id (into r, which the caller writes)
// if r has none. Where the file system enforces no project quota, or the
// volume asks no capacity, nothing is done. Applying it again is the same.
func (d controllerServer) applyQuota(r *record) error {
	if !d.quota || r.CapacityBytes <= 0 {
		return nil
	}
	if r.ProjectID == 0 {
		id, err := d.allocProject()
		if err != nil {
			return errf(codes.Internal, "allocate a project id: %v", err)
		}
		r.ProjectID = id
	}
	dir := d.volumeDir(r.Name)
	if err := setProject(dir, r.ProjectID); err != nil {
		return errf(codes.Internal, "volume %s: %v", r.Name, err)
	}
	if err := setProjectLimit(dir, r.ProjectID, r.CapacityBytes); err != nil {
		return errf(codes.Internal, "volume %s: %v", r.Name, err)
	}
	return nil
}

// clearQuota removes the limit of r's project, before its volume goes.
func (d controllerServer) clearQuota(r *record) error {
	if !d.quota || r.ProjectID == 0 {
		return nil
	}
	if err := setProjectLimit(filepath.Join(d.cfg.BaseDir, volumesDir), r.ProjectID, 0); err != nil {
		return errf(codes.Internal, "volume %s: %v", r.Name, err)
	}
	return nil
}

// reapplyQuota is applyQuota for a volume already recorded: the same
// project and limit again, or a project for a volume made before the
// file system had project quotas, recorded then.
func (d controllerServer) reapplyQuota(r *record) error {
	had := r.ProjectID
	if err := d.applyQuota(r); err != nil {
		return err
	}
	if r.ProjectID != had {
		if err := d.writeRecord(r); err != nil {
			return errf(codes.Internal, "record volume %s: %v", r.Name, err)
		}
	}
	return nil
}
