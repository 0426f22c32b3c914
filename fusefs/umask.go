package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/internal/lockorder"
)

// Modes of new objects. The mount negotiates FUSE_DONT_MASK (MountOptions):
// the kernel sends the mode the caller asked for, without its umask, and
// the daemon, whose own umask is 0 (realmfs sets it at start), applies the
// rule the kernel applies natively on a filesystem with POSIX ACLs
// (posix_acl_create): a parent directory with a default ACL decides the
// new object's permissions, and the umask is ignored; otherwise the umask
// applies. Without DONT_MASK the kernel would apply the umask itself even
// under a default ACL, and with the daemon's own umask on top a group-shared
// tree (umask 002) would lose group write.
//
// The kernel sends the caller's umask with every CREATE, MKDIR and MKNOD
// (current_umask(), whatever DONT_MASK says), but go-fuse's node API does
// not pass it on. The mount's raw filesystem (umaskFS) notes it, by the
// thread that made the request, before the node sees the request: that
// thread is blocked in it until the answer, so while the request is
// answered its thread id names it alone. Where the note is missing (a
// request that did not come through the mount's raw filesystem) or
// ambiguous, the caller's umask is read from /proc/PID/status, which is the
// same umask: the thread is blocked in the system call it runs under. The
// note spares a create the twelve system calls of reading that file.

// umaskUnknown is the umask assumed when the caller's cannot be read (a
// caller outside the daemon's pid namespace, which the kernel names pid 0,
// or a /proc that hides it): the strictest, so that no object is ever made
// more permissive than its caller would have made it.
const umaskUnknown = 0o077

// newMode is the mode (permission and set-ID bits, without the type) an
// object made with mode by the caller in the directory held by pfd gets
// natively. Making it with this mode, or chmodding it to this mode after,
// gives the native result: under a default ACL the backing filesystem's
// own masking of it changes nothing, and the named entries it copies from
// the default ACL are not masked by the mode.
func newMode(ctx context.Context, pfd int, mode uint32) uint32 {
	mode &= 07777
	if perm, ok := defaultACLPerm(pfd); ok {
		return mode&^0777 | mode&perm
	}
	return mode &^ callerUmask(ctx)
}

// callerUmask is the umask of the process that made the request in ctx; 0
// for a request that did not come from the kernel (the unit tests).
func callerUmask(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok || c == nil {
		return 0
	}
	if c.Pid == 0 {
		return umaskUnknown
	}
	if u, ok := requestUmasks.get(c.Pid); ok {
		return u
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(c.Pid), 10) + "/status")
	if err != nil {
		return umaskUnknown
	}
	return parseUmask(b)
}

// umaskTable holds the umask of each request in progress that carries one,
// by the id of the thread that made it. Thread ids are the system's, so
// one table serves every mount of the process.
type umaskTable struct {
	mu lockorder.Mutex[lockorder.UmaskTableMu]
	m  map[uint32]umaskNote
}

// umaskNote is a thread's umask; n > 1 if more than one request of the
// thread is in progress (one the kernel gave up on, a reused id), when
// the note says nothing.
type umaskNote struct {
	umask uint32
	n     int
}

var requestUmasks = umaskTable{m: make(map[uint32]umaskNote)}

// hold notes the umask of a request by thread tid in progress until the
// returned func is called. Pid 0 (a caller outside the daemon's pid
// namespace) names no thread and is not noted.
func (t *umaskTable) hold(tid, umask uint32) func() {
	if tid == 0 {
		return func() {}
	}
	t.mu.Lock()
	e := t.m[tid]
	t.m[tid] = umaskNote{umask: umask & 0o777, n: e.n + 1}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if e := t.m[tid]; e.n <= 1 {
			delete(t.m, tid)
		} else {
			e.n--
			t.m[tid] = e
		}
		t.mu.Unlock()
	}
}

// get returns the umask of thread tid's request in progress, if one alone
// is noted.
func (t *umaskTable) get(tid uint32) (uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[tid]
	return e.umask, ok && e.n == 1
}

// umaskFS notes the umask of each CREATE, MKDIR and MKNOD for callerUmask
// while the node bridge beneath answers it.
type umaskFS struct {
	fuse.RawFileSystem
}

func (u umaskFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer requestUmasks.hold(in.Caller.Pid, in.Umask)()
	return u.RawFileSystem.Create(cancel, in, name, out)
}

func (u umaskFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer requestUmasks.hold(in.Caller.Pid, in.Umask)()
	return u.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (u umaskFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer requestUmasks.hold(in.Caller.Pid, in.Umask)()
	return u.RawFileSystem.Mknod(cancel, in, name, out)
}

// parseUmask finds the Umask: line of a /proc/PID/status (Linux 4.7 on);
// umaskUnknown if there is none.
func parseUmask(status []byte) uint32 {
	for line := range bytes.Lines(status) {
		v, ok := bytes.CutPrefix(line, []byte("Umask:"))
		if !ok {
			continue
		}
		u, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
		if err != nil || u > 0o777 {
			return umaskUnknown
		}
		return uint32(u)
	}
	return umaskUnknown
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
	n, err := dirfd.Getxattr(pfd, "system.posix_acl_default", buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = dirfd.Getxattr(pfd, "system.posix_acl_default", nil); err == nil {
			buf = make([]byte, n)
			n, err = dirfd.Getxattr(pfd, "system.posix_acl_default", buf)
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
