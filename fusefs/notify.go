package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/internal/devthread"
	"github.com/realm-dev/realm/internal/lockorder"
)

// The notifier tells the kernel to forget what it cached about names and
// inodes that changed behind its back: in BACKING, by processes outside the
// mount (see watch.go), or by the daemon itself where the kernel cannot know
// (a conflict copy appearing). It is one goroutine fed by a coalescing queue:
// an entry invalidation takes the directory's lock in the kernel, which a
// process may hold while it waits for this daemon, so notifications are
// never sent from a request handler nor with any of realm's locks held, and
// producers never wait for them. The queue only grows by distinct names;
// past maxQueued it collapses into "forget everything".
//
// Blocked there, the writing thread sleeps uninterruptibly. So an entry is
// invalidated only once no request the kernel sends holding that
// directory's lock is in progress in the daemon (Node.busy), and an inode
// only for its attributes (offset -1: no page lock is taken; with
// AUTO_INVAL_DATA the kernel drops cached pages and listings itself when it
// sees the new mtime). Node.busy cannot see the kernel take the lock before
// it sends a request, so a notification may still wait a moment; written
// on a thread of its own (internal/devthread), it cannot keep a killed
// daemon from dying.

// maxQueued bounds the distinct invalidations waiting in the queue.
const maxQueued = 1 << 16

type entryInval struct {
	dir  *fs.Inode
	name string
}

type notifier struct {
	root *fs.Inode

	mu      lockorder.Mutex[lockorder.NotifierMu]
	entries map[entryInval]struct{}
	inodes  map[*fs.Inode]struct{}
	all     bool
	closed  bool

	// dev, once set, is the thread notifications are written on
	// (internal/devthread); nil: the notifier's own.
	dev *devthread.Thread
	// whenBusy, for tests, sends entry invalidations even into
	// directories with requests in progress: they wait in the kernel.
	whenBusy bool

	wake chan struct{} // capacity 1: a pending wake-up
	done chan struct{} // closed when run returns
	sent func()        // tests: called after each batch
}

func newNotifier(root *fs.Inode) *notifier {
	return &notifier{
		root:    root,
		entries: make(map[entryInval]struct{}),
		inodes:  make(map[*fs.Inode]struct{}),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// entry queues forgetting name in dir (a positive or a negative entry) and
// dir's own attributes and cached listing.
func (q *notifier) entry(dir *fs.Inode, name string) {
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

// inode queues forgetting n's attributes and cached content.
func (q *notifier) inode(n *fs.Inode) {
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

// everything queues forgetting every name and inode the kernel has from
// this mount: the watcher lost events.
func (q *notifier) everything() {
	q.mu.Lock()
	q.all = true
	clear(q.entries)
	clear(q.inodes)
	q.mu.Unlock()
	q.kick()
}

func (q *notifier) overflowLocked() {
	if len(q.entries)+len(q.inodes) > maxQueued {
		q.all = true
		clear(q.entries)
		clear(q.inodes)
	}
}

func (q *notifier) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run sends the queued notifications until close.
func (q *notifier) run() {
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
				q.entry(e.dir, e.name)
			}
		}
		if q.sent != nil {
			q.sent()
		}
	}
}

// forgetAll walks the inodes the kernel knows and forgets every name and
// attribute; their next use asks the daemon again.
func (q *notifier) forgetAll() {
	stack := []*fs.Inode{q.root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dir.NotifyContent(-1, 0)
		for name, child := range dir.Children() {
			if q.busy(dir) {
				q.entry(dir, name) // later, as in run
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

// busy reports whether the daemon is answering a request that the kernel
// sent holding dir's lock: an entry invalidation there would wait for it.
func (q *notifier) busy(dir *fs.Inode) bool {
	n := asNode(dir)
	return n != nil && n.busy.Load() > 0 && !q.whenBusy
}

// send runs f, which writes notifications, on the device thread if there
// is one.
func (q *notifier) send(f func()) {
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

// isolate moves the writing of notifications to a thread of their own
// (internal/devthread); call it once the device is open, i.e. mounted.
func (q *notifier) isolate() error {
	dev, err := devthread.Start()
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.dev = dev
	q.mu.Unlock()
	return nil
}

// close stops run after the batch in flight.
func (q *notifier) close() {
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
