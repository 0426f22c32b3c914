package guard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Modes of new objects, as the kernel makes them natively on a filesystem
// with POSIX ACLs (posix_acl_create): a parent directory with a default
// ACL decides the new object's permissions, and the umask is ignored;
// otherwise the caller's umask applies. fusefs negotiates FUSE_DONT_MASK,
// so the kernel leaves both to the daemon (fusefs's umask.go says why).

// UmaskUnknown is the umask assumed when the caller's cannot be read (a
// caller outside the daemon's pid namespace, which the kernel names pid 0,
// or a /proc that hides it): the strictest, so that no object is ever made
// more permissive than its caller would have made it.
const UmaskUnknown = 0o077

// NewMode is the mode (permission and set-ID bits, without the type) an
// object made with mode in the directory held by pfd gets natively, umask
// giving the caller's umask, asked only where no default ACL decides.
// Making it with this mode, or chmodding it to this mode after, gives the
// native result: under a default ACL the backing filesystem's own masking
// of it changes nothing, and the named entries it copies from the default
// ACL are not masked by the mode.
func NewMode(pfd int, mode uint32, umask func() uint32) uint32 {
	mode &= 07777
	if perm, ok := defaultACLPerm(pfd); ok {
		return mode&^0777 | mode&perm
	}
	return mode &^ umask()
}

// ProcUmask is the umask of the process pid, read from /proc/PID/status:
// the umask a blocked caller makes its object with; UmaskUnknown if it
// cannot be read.
func ProcUmask(pid uint32) uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return UmaskUnknown
	}
	return parseUmask(b)
}

// parseUmask finds the Umask: line of a /proc/PID/status (Linux 4.7 on);
// UmaskUnknown if there is none.
func parseUmask(status []byte) uint32 {
	for line := range bytes.Lines(status) {
		v, ok := bytes.CutPrefix(line, []byte("Umask:"))
		if !ok {
			continue
		}
		u, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
		if err != nil || u > 0o777 {
			return UmaskUnknown
		}
		return uint32(u)
	}
	return UmaskUnknown
}

// Tags of the entries of an ACL as Linux stores it in system.posix_acl_*
// (uapi linux/posix_acl.h and posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
)

// defaultACLPerm reports whether the directory held by pfd has a default
// ACL and, if so, the permission bits it lets a new object keep: the
// owner's entry, the mask's (the owning group's if there is no mask) and
// others'. A directory whose default ACL cannot be read is taken to have
// none, as a filesystem without ACLs has none.
func defaultACLPerm(pfd int) (uint32, bool) {
	buf := make([]byte, 256)
	n, err := dirfd.DirGetxattr(pfd, "system.posix_acl_default", buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = dirfd.DirGetxattr(pfd, "system.posix_acl_default", nil); err == nil {
			buf = make([]byte, n)
			n, err = dirfd.DirGetxattr(pfd, "system.posix_acl_default", buf)
		}
	}
	if err != nil {
		return 0, false
	}
	return aclPerm(buf[:n])
}

// aclPerm is defaultACLPerm's reading of an ACL's xattr value: a version
// (2), then entries of tag (2 bytes), permissions (2) and id (4).
func aclPerm(b []byte) (uint32, bool) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 2 {
		return 0, false
	}
	var user, group, mask, other uint32
	var haveUser, haveGroup, haveMask, haveOther bool
	for b = b[4:]; len(b) >= 8; b = b[8:] {
		perm := uint32(binary.LittleEndian.Uint16(b[2:])) & 7
		switch binary.LittleEndian.Uint16(b) {
		case aclUserObj:
			user, haveUser = perm, true
		case aclGroupObj:
			group, haveGroup = perm, true
		case aclMask:
			mask, haveMask = perm, true
		case aclOther:
			other, haveOther = perm, true
		}
	}
	if !haveUser || !haveGroup || !haveOther || len(b) != 0 {
		return 0, false
	}
	if haveMask {
		group = mask
	}
	return user<<6 | group<<3 | other, true
}
