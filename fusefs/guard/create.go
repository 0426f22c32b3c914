package guard

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Making a name. A daemon that creates on behalf of other users (fusefs:
// ChownToCaller) makes each object as root, then hands it over: between
// the two, something outside the mount could swap another object in at the
// name, which the hand-over would give the caller. So the object is made
// with no permission bits (a root-made object no one can open yet), its
// fd's stat is checked to be that object (MadeByCall), and only then is it
// given its owner and its mode. These are the rules of those steps; fusefs
// makes the system calls.

// MknodMode is the mode mknod makes for mode: a fifo, a socket or a
// regular file (a type of 0 is a regular file). ok is false for anything
// else: a device node is refused even to a caller with CAP_MKNOD, since
// BACKING is a directory of the host, where a node a sandboxed root made
// would open as the device for any host process allowed to open it.
func MknodMode(mode uint32) (_ uint32, ok bool) {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFREG:
		return mode, true
	case 0:
		return mode | syscall.S_IFREG, true
	}
	return mode, false
}

// HandsOver reports whether an object made for the caller uid is handed
// over to it (chown: the mount creates on behalf of other users): a root
// caller's object is the daemon's already.
func HandsOver(chown bool, uid uint32) bool { return chown && uid != 0 }

// FirstMode is the permission bits an object of mode (its type and final
// bits) is made with: none when it is to be handed over, so that it can be
// recognised as the one this call made before anyone can open it; a
// symlink's, which have no meaning, are always its own.
func FirstMode(mode uint32, handOver bool) uint32 {
	if handOver && mode&syscall.S_IFMT != syscall.S_IFLNK {
		return 0
	}
	return mode & 07777
}

// MadeByCall reports whether st, the stat of what a name leads to just
// after a call made an object of mode there (FirstMode), is that object:
// of its type, and when handed over, with no permission bits and owned by
// euid (the daemon). Anything else was swapped in from outside. inherited
// is the set-group-ID bit a directory made in a set-group-ID directory
// gets whatever mode it was made with, and keeps.
func MadeByCall(st *unix.Stat_t, mode uint32, handOver bool, euid uint32) (inherited uint32, ok bool) {
	typ := mode & syscall.S_IFMT
	if typ == syscall.S_IFDIR {
		inherited = st.Mode & syscall.S_ISGID
	}
	if st.Mode&syscall.S_IFMT != typ {
		return 0, false
	}
	if handOver && typ != syscall.S_IFLNK && (st.Mode&07777 != inherited || st.Uid != euid) {
		return 0, false
	}
	return inherited, true
}

// Claims reports whether an object made for the caller (uid, gid) is given
// to it (fusefs/admit: Gate.Claim, with ChownToCaller): root in group 0 is the
// daemon's own identity.
func Claims(uid, gid uint32) bool { return uid != 0 || gid != 0 }

// NewOwner is the owner (for chown) an object made for the caller (uid,
// gid) is given: the caller, and its group, except in a set-group-ID
// directory (parentSetGID), where the group stays the directory's (-1:
// unchanged), as the kernel would have made it.
func NewOwner(uid, gid uint32, parentSetGID bool) (int, int) {
	if parentSetGID {
		return int(uid), -1
	}
	return int(uid), int(gid)
}
