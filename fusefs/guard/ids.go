package guard

import (
	"sync/atomic"

	"github.com/realm-dev/realm/internal/lockorder"
	"github.com/realm-dev/realm/locks"
)

// ID names one backing file over time (locks.FileID).
type ID = locks.FileID

// IDs remembers identities: of every credential file the mount has seen
// by a denied name (a scan of the backing tree at mount, then every
// lookup), and, as other sets, of protected files and of the protected
// directories the mount made. A file whose identity is in the credential
// set is a credential under any name it has or gets, whatever its link
// count: a hard link made outside the mount to ~/.ssh/id_rsa under an
// innocent name is refused, and stays refused after the credential's own
// name is removed or renamed, through the mount or in BACKING, and so is
// the same file seen through a bind mount.
//
// Where the backing filesystem has no birth time the generation is 0 for
// every file, and a new file with a recycled number is refused (closed,
// not open). Entries are never dropped: a credential's identity cannot
// stop being one.
type IDs struct {
	mu      lockorder.RWMutex[lockorder.CredInodesMu]
	set     map[ID]struct{}
	scanned chan struct{} // closed when the mount-time scan has finished; nil: none to wait for
	// stored: the identities a store gave (AddStored) that the mount-time
	// scan has not met yet, by inode number; nStored counts them, so that
	// the scan's Meet costs no lock once there are none.
	stored  map[uint64][]ID
	nStored atomic.Int64
}

// Add records id.
func (c *IDs) Add(id ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = make(map[ID]struct{})
	}
	c.set[id] = struct{}{}
}

// Has waits for the mount-time scan, then looks the identity up: one map
// lookup, no system call. Every name of a file may be the credential's, so
// every check waits for the scan, not only that of a multiply-linked file (a
// bind mount shows one file, with one link, under two names).
func (c *IDs) Has(id ID) bool {
	if c.scanned != nil {
		AwaitScan(c.scanned)
	}
	return c.Knows(id)
}

// Knows is Has without waiting for the mount-time scan: for a caller
// under a lock whose request waited for it already.
func (c *IDs) Knows(id ID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.set[id]
	return ok
}

// AwaitScan waits for scanned to be closed, holding no realm lock if it
// has to wait: the scan may take minutes.
func AwaitScan(scanned <-chan struct{}) {
	select {
	case <-scanned:
	default:
		lockorder.AssertNoneHeld("a wait for the mount-time scan")
		<-scanned
	}
}

// HasKey is Has by (dev, ino) alone, whatever the generation: for a caller
// that knows no birth time (a journal's record), which takes a recycled
// number for the credential's (closed, not open).
func (c *IDs) HasKey(k locks.Key) bool {
	if c.scanned != nil {
		AwaitScan(c.scanned)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id := range c.set {
		if id.Key == k {
			return true
		}
	}
	return false
}

// AddStored records id, read from the store of an earlier mount: it is
// dropped again (DropUnmet) if the mount-time scan meets no file of its
// inode number in BACKING.
func (c *IDs) AddStored(id ID) {
	c.Add(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stored == nil {
		c.stored = make(map[uint64][]ID)
	}
	c.stored[id.Key.Ino] = append(c.stored[id.Key.Ino], id)
	c.nStored.Add(1)
}

// Meet notes that the scan met a file of inode number ino: a stored
// identity of that number stays.
func (c *IDs) Meet(ino uint64) {
	if c.nStored.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ids, ok := c.stored[ino]; ok {
		delete(c.stored, ino)
		c.nStored.Add(-int64(len(ids)))
	}
}

// DropUnmet forgets the stored identities the scan, walking all of
// BACKING, did not meet: their files are gone, and where the filesystem
// has no birth time a later file given the number must not be refused.
func (c *IDs) DropUnmet() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ids := range c.stored {
		for _, id := range ids {
			delete(c.set, id)
		}
	}
	c.stored = nil
	c.nStored.Store(0)
}

// All is every identity recorded.
func (c *IDs) All() []ID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	all := make([]ID, 0, len(c.set))
	for id := range c.set {
		all = append(all, id)
	}
	return all
}
