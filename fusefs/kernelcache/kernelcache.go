// Package kernelcache is what a realm mount lets the kernel keep and what
// it asks of the kernel's FUSE: the cache timeouts, and the capabilities
// and options it mounts with. It needs nothing of the mount's state, so
// that the choices, and why each is made, read in one place.
package kernelcache

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Timeouts are how long the kernel keeps a name (Entry), a file's
// attributes (Attr) and the absence of a name (Negative) without asking the
// daemon again. They trade freshness for round trips: a change made in the
// backing dir behind the mount's back shows after at most that long. No
// check depends on them: every open, readlink and change still reaches the
// guard, and every node is verified against the object it expects.
type Timeouts struct {
	Entry, Attr, Negative time.Duration
}

// Default is the kernel cache of a mount whose BACKING is not watched:
// go-fuse's and libfuse's one second, and no negative entries, so a file
// created in the backing dir is seen at once.
var Default = Timeouts{Entry: time.Second, Attr: time.Second}

// Watched is the kernel cache of a mount whose BACKING is watched: changes
// made behind the mount reach the kernel as invalidations (fusefs's
// watch.go), so names, attributes and the absence of names are kept for a
// minute, and a stat storm or a git status runs from the kernel's cache.
var Watched = Timeouts{Entry: time.Minute, Attr: time.Minute, Negative: time.Minute}

// InEffect is the kernel cache a mount uses: the default for whether
// BACKING is watched, with the fields of set that are not negative.
func InEffect(watched bool, set *Timeouts) Timeouts {
	c := Default
	if watched {
		c = Watched
	}
	if set != nil {
		if set.Entry >= 0 {
			c.Entry = set.Entry
		}
		if set.Attr >= 0 {
			c.Attr = set.Attr
		}
		if set.Negative >= 0 {
			c.Negative = set.Negative
		}
	}
	return c
}

// Capabilities gives mo what realm asks of the kernel's FUSE, and takes
// away what it must not be offered; passthrough: the mount lets the
// kernel read files opened read-only straight from BACKING.
func Capabilities(mo fuse.MountOptions, passthrough bool) fuse.MountOptions {
	mo.EnableLocks = true
	// Access ACLs in BACKING are enforced by the kernel, as by the backing
	// filesystem: with mode bits alone (default_permissions), a user an
	// ACL denies could read the file through the mount, and one it grants
	// could not. The kernel asks for system.posix_acl_* and caches them.
	mo.EnableAcl = true
	// The caller's umask reaches the daemon unapplied, which applies it
	// or the parent's default ACL as the kernel would natively
	// (admit.Gate.NewMode).
	mo.ExtraCapabilities |= fuse.CAP_DONT_MASK
	// Write handles use direct I/O; shared mmap of them must still work.
	mo.ExtraCapabilities |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	// O_TRUNC arrives with the open, so the temp starts empty instead of
	// being copied from the file and then truncated.
	mo.ExtraCapabilities |= fuse.CAP_ATOMIC_O_TRUNC
	// The daemon drops set-user-ID, set-group-ID and capabilities on a
	// change of content itself (writeengine: ensureTemp), so the kernel
	// need not ask for security.capability before every write.
	mo.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	if mo.MaxWrite == 0 {
		mo.MaxWrite = 1 << 20
	}
	if !passthrough {
		mo.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	// Every open must reach the guard: never offer the kernel to skip
	// OPEN and OPENDIR (fusefs's openErrno keeps the daemon from
	// answering ENOSYS, which would make it skip them anyway).
	mo.DisabledCapabilities |= fuse.CAP_NO_OPEN_SUPPORT | fuse.CAP_NO_OPENDIR_SUPPORT
	return mo
}
