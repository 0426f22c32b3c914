// Package setattr applies what a FUSE SETATTR asks of a file's mode,
// owner and times to the object an fd holds (through dirfd, the one
// layer of system calls on BACKING). Its callers judge first: the guard's
// checks of the node, the lock table, the journal's record.
package setattr

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Apply applies the mode, owner and time changes of in to the object
// held by fd.
func Apply(fd int, in *fuse.SetAttrIn) syscall.Errno {
	if mode, ok := in.GetMode(); ok {
		if err := dirfd.Chmod(fd, mode&07777); err != nil {
			return dirfd.Errno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := dirfd.Chown(fd, u, g); err != nil {
			return dirfd.Errno(err)
		}
	}
	if in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if in.Valid&fuse.FATTR_ATIME != 0 {
			ts[0] = timespec(in.Valid&fuse.FATTR_ATIME_NOW != 0, in.Atime, in.Atimensec)
		}
		if in.Valid&fuse.FATTR_MTIME != 0 {
			ts[1] = timespec(in.Valid&fuse.FATTR_MTIME_NOW != 0, in.Mtime, in.Mtimensec)
		}
		if err := dirfd.Utimens(fd, ts); err != nil {
			return dirfd.Errno(err)
		}
	}
	return 0
}

func timespec(now bool, sec uint64, nsec uint32) unix.Timespec {
	if now {
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	}
	return unix.Timespec{Sec: int64(sec), Nsec: int64(nsec)}
}
