package fusefs

import (
	"context"
	"fmt"

	"github.com/realm-dev/realm/locks"
)

// Owners. "Owner" in this package means one thing: the locks.Owner a
// calling process writes as (its sandbox's cgroup by default), which the
// lock table, the pending writes and the audit log's "owner" share. The
// kernel's lock_owner of a record lock is a locker (reclock.go).

// owner names the lock owner of the calling process.
func (f *FS) owner(ctx context.Context) locks.Owner {
	c := caller(ctx)
	if f.opts.Owners == nil {
		return locks.Owner(fmt.Sprintf("pid:%d", c.Pid))
	}
	o, err := f.opts.Owners.Owner(c.Pid)
	if err != nil {
		// The process is gone already: it can own nothing lasting.
		return locks.Owner(fmt.Sprintf("gone:%d", c.Pid))
	}
	return o
}

// processOf is the process (thread group id) of the calling thread pid, read
// when the handle is opened (an open(2) holds no lock that reading its
// status would need); the thread itself if that fails.
func (f *FS) processOf(pid uint32) uint32 { return f.processes.Process(pid) }
