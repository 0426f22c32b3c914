package fusefs

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/realm-dev/realm/fusefs/guard"
)

// Modes of new objects. The mount negotiates FUSE_DONT_MASK (MountOptions):
// the kernel sends the mode the caller asked for, without its umask, and
// the daemon, whose own umask is 0 (realmfs sets it at start), applies the
// rule the kernel applies natively on a filesystem with POSIX ACLs
// (guard.NewMode: a parent's default ACL decides, else the umask). Without
// DONT_MASK the kernel would apply the umask itself even under a default
// ACL, and with the daemon's own umask on top a group-shared tree (umask
// 002) would lose group write.
//
// The kernel sends the caller's umask with every CREATE, MKDIR and MKNOD
// (current_umask(), whatever DONT_MASK says), but go-fuse's node API does
// not pass it on: the mount's raw filesystem notes it for the request
// (requestnotes.go). Where the note is missing (a request that did not
// come through the mount's raw filesystem) the caller's umask is read from
// /proc/PID/status (guard.ProcUmask), which is the same umask: the thread
// is blocked in the system call it runs under. The note spares a create
// the twelve system calls of reading that file.

// newMode is the mode (permission and set-ID bits, without the type) an
// object made with mode by the caller in the directory held by pfd gets
// natively.
func (f *FS) newMode(ctx context.Context, pfd int, mode uint32) uint32 {
	return guard.NewMode(pfd, mode, func() uint32 { return f.callerUmask(ctx) })
}

// callerUmask is the umask of the process that made the request in ctx; 0
// for a request that did not come from the kernel (the unit tests).
func (f *FS) callerUmask(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok || c == nil {
		return 0
	}
	if c.Pid == 0 {
		return guard.UmaskUnknown
	}
	if u, ok := f.umasks.of(ctx); ok {
		return u
	}
	return guard.ProcUmask(c.Pid)
}
