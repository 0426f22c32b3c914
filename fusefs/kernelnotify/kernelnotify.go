// Package kernelnotify tells the kernel to forget what it cached of a
// FUSE mount's names and inodes: one goroutine writing invalidations from
// a coalescing queue, never from a request handler nor under a lock of
// the daemon's. It is a package of its own because it needs of the node
// tree only go-fuse's inodes and one question, whether a directory is
// busy (New's busy): fusefs queues what its watcher and its own changes
// make stale.
package kernelnotify

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/internal/devthread"
	"github.com/realm-dev/realm/internal/lockorder"
)

// The Notifier tells the kernel to forget what it cached about names and
// inodes that changed behind its back: in BACKING, by processes outside the
// mount (fusefs/watch), or by the daemon itself where the kernel cannot know
// (a conflict copy appearing). It is one goroutine fed by a coalescing queue:
// an entry invalidation takes the directory's lock in the kernel, which a
// process may hold while it waits for this daemon, so notifications are
// never sent from a request handler nor with any of realm's locks held, and
// producers never wait for them. The queue only grows by distinct names;
// past maxQueued it collapses into "forget everything".
//
// Blocked there, the writing thread sleeps uninterruptibly. So an entry is
// invalidated only once no request the kernel sends holding that
// directory's lock is in progress in the daemon (New's busy: fusefs's
// Node.busy), and an inode
// only for its attributes (offset -1: no page lock is taken; with
// AUTO_INVAL_DATA the kernel drops cached pages and listings itself when it
// sees the new mtime). busy cannot see the kernel take the lock before
// it sends a request, so a notification may still wait a moment; written
// on a thread of its own (internal/devthread), it cannot keep a killed
// daemon from dying.

// maxQueued bounds the distinct invalidations waiting in the queue.
const maxQueued = 1 << 16

type entryInval struct {
	dir  *fs.Inode
	name string
}

// Notifier is the queue and the goroutine that empties it.
type Notifier struct {
	root *fs.Inode
	// busy reports whether the daemon is answering a request that the
	// kernel sent holding dir's lock: an entry invalidation there would
	// wait for it.
	busy func(dir *fs.Inode) bool

	mu      lockorder.Mutex[lockorder.NotifierMu]
	entries map[entryInval]struct{}
	inodes  map[*fs.Inode]struct{}
	all     bool
	closed  bool

	// dev, once set, is the thread notifications are written on
	// (internal/devthread); nil: the notifier's own.
	dev *devthread.Thread

	wake chan struct{} // capacity 1: a pending wake-up
	done chan struct{} // closed when run returns
}

// New starts a notifier for the mount whose root is root. busy says
// whether a directory has a request in progress that the kernel sent
// holding its lock; its entries wait until it has none.
func New(root *fs.Inode, busy func(dir *fs.Inode) bool) *Notifier {
	q := &Notifier{
		root:    root,
		busy:    busy,
		entries: make(map[entryInval]struct{}),
		inodes:  make(map[*fs.Inode]struct{}),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go q.run()
	return q
}

// Entry queues forgetting name in dir (a positive or a negative entry) and
// dir's own attributes and cached listing.
func (q *Notifier) Entry(dir *fs.Inode, name string) {
	if dir == nil {
		return
	}
	q.mu.Lock()
	if !q.all {
		q.entries[entryInval{dir, name}] = struct{}{}
		q.inodes[dir] = struct{}{}
		q.overflowLocked()
	}
	q.mu.Unlock()
	q.kick()
}

// Inode queues forgetting n's attributes and cached content.
func (q *Notifier) Inode(n *fs.Inode) {
	if n == nil {
		return
	}
	q.mu.Lock()
	if !q.all {
		q.inodes[n] = struct{}{}
		q.overflowLocked()
	}
	q.mu.Unlock()
	q.kick()
}

// Everything queues forgetting every name and inode the kernel has from
// this mount: the watcher lost events.
func (q *Notifier) Everything() {
	q.mu.Lock()
	q.all = true
	clear(q.entries)
	clear(q.inodes)
	q.mu.Unlock()
	q.kick()
}

func (q *Notifier) overflowLocked() {
	if len(q.entries)+len(q.inodes) > maxQueued {
		q.all = true
		clear(q.entries)
		clear(q.inodes)
	}
}

func (q *Notifier) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run sends the queued notifications until close.
func (q *Notifier) run() {
	defer close(q.done)
	for range q.wake {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		entries, inodes, all := q.entries, q.inodes, q.all
		q.entries, q.inodes, q.all = make(map[entryInval]struct{}), make(map[*fs.Inode]struct{}), false
		q.mu.Unlock()
		var later []entryInval
		q.send(func() {
			if all {
				q.forgetAll()
			}
			// Entries first: a name that now leads elsewhere must not be
			// revalidated through its old inode's fresh attributes.
			for e := range entries {
				if q.busy(e.dir) {
					later = append(later, e)
					continue
				}
				e.dir.NotifyEntry(e.name) // ENOENT: the kernel no longer has it
			}
			for n := range inodes {
				n.NotifyContent(-1, 0)
			}
		})
		if len(later) > 0 {
			// Back in the queue, for when their directories are idle.
			time.Sleep(busyRetry)
			for _, e := range later {
				q.Entry(e.dir, e.name)
			}
		}
	}
}

// forgetAll walks the inodes the kernel knows and forgets every name and
// attribute; their next use asks the daemon again.
func (q *Notifier) forgetAll() {
	stack := []*fs.Inode{q.root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dir.NotifyContent(-1, 0)
		for name, child := range dir.Children() {
			if q.busy(dir) {
				q.Entry(dir, name) // later, as in run
			} else {
				dir.NotifyEntry(name)
			}
			if child.IsDir() {
				stack = append(stack, child)
			} else {
				child.NotifyContent(-1, 0)
			}
		}
	}
}

// busyRetry is how long entries of busy directories wait before they are
// tried again.
const busyRetry = time.Millisecond

// send runs f, which writes notifications, on the device thread if there
// is one.
func (q *Notifier) send(f func()) {
	lockorder.AssertNoneHeld("a kernel notification")
	q.mu.Lock()
	dev := q.dev
	q.mu.Unlock()
	if dev == nil {
		f()
		return
	}
	dev.Do(f)
}

// Isolate moves the writing of notifications to a thread of their own
// (internal/devthread); call it once the device is open, i.e. mounted.
func (q *Notifier) Isolate() error {
	dev, err := devthread.Start()
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.dev = dev
	q.mu.Unlock()
	return nil
}

// Close stops the notifier after the batch in flight.
func (q *Notifier) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.kick()
	<-q.done
	q.mu.Lock()
	dev := q.dev
	q.mu.Unlock()
	if dev != nil {
		dev.Stop()
	}
}
