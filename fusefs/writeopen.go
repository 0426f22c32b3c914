package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/realm-dev/realm/locks"
)

// A write open's way to the owner's write in progress (the write engine,
// writeengine): the lock it takes, and the handle it makes over the write.

// How long a conflicting open (or rename, unlink, metadata change) waits
// for another owner's release. The kernel sends RELEASE after close(2)
// has returned, so a sequential writer's next step would meet the lock
// its last one let go of. A hold whose opener closed its last descriptor
// is closing (writeproto), and a conflicting call waits for it to be
// released, woken by the release (locks.AcquireWait), up to releaseWait:
// a bound for a hold whose RELEASE does not come (one the daemon took for
// closed while a descriptor of it lives on: a forked child's, or a dup
// beside an idle write handle), never reached by load. A hold not known
// to be closing is waited for only releaseGrace (a close the daemon
// could not judge, by another process than the opener), then EBUSY.
const (
	releaseWait  = 2 * time.Second
	releaseGrace = 250 * time.Millisecond
)

// patience is the wait of a conflicting call that starts now.
func patience() locks.Patience {
	now := time.Now()
	return locks.Patience{Closing: now.Add(releaseWait), Grace: now.Add(releaseGrace)}
}

// lockMode is the lock an open with flags takes: an append without
// O_TRUNC shares the file with other owners' appends (they go into the
// file in place, each whole); every other write excludes other owners.
func lockMode(flags uint32) locks.Mode {
	if flags&syscall.O_APPEND != 0 && flags&syscall.O_TRUNC == 0 {
		return locks.Append
	}
	return locks.Write
}

// acquire takes the lock on n for owner in mode, waiting for a release
// that is on its way (releaseWait).
func (f *FS) acquire(ctx context.Context, key locks.Key, owner locks.Owner, mode locks.Mode) (*locks.Lease, error) {
	return f.writeLocks.AcquireWait(ctx, key, owner, mode, patience())
}

// ownWrite returns, locked, the caller's own write in progress on the file
// with key; nil if there is none. The caller must unlock w.Entry().
func (f *FS) ownWrite(ctx context.Context, key locks.Key) *pendingWrite {
	return f.engine.OwnWrite(f.owner(ctx), key)
}
