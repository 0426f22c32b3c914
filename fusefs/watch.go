package fusefs

import (
	"github.com/realm-dev/realm/fusefs/watch"
	"github.com/realm-dev/realm/internal/lockorder"
)

// watcher is the mount's watch.Watcher of BACKING's directories, keyed by
// their nodes, and its Sink: what it sees changed behind the mount becomes
// kernel invalidations (FS.notify), so that the kernel may cache names,
// attributes and listings for long (WatchedCache).
type watcher struct {
	*watch.Watcher[*Node]
	fs *FS
}

// newWatcher starts watching BACKING from its root.
func newWatcher(f *FS) (*watcher, error) {
	w := &watcher{fs: f}
	ww, err := watch.New(f.root, f.rootFd, w)
	if err != nil {
		return nil, err
	}
	w.Watcher = ww
	f.root.watched.Store(true)
	return w, nil
}

// add watches directory node n, whose verified fd is fd. A directory that
// cannot be watched is logged (the first) and keeps the short cache
// timeouts (see Node.Lookup).
func (w *watcher) add(n *Node, fd int) {
	first, err := w.Add(n, fd)
	if err != nil {
		if first {
			w.fs.logf("watch %q: %v; changes made in BACKING behind the mount show there after the short cache timeouts", n.Rel(""), err)
		}
		return
	}
	n.watched.Store(true)
}

// quiet keeps the daemon's own changes to the temp held by fd out of the
// watcher's queue (watch.Watcher.Quiet), reporting whether it did.
func (w *watcher) quiet(fd int) bool { return w.Quiet(fd) }

// unquiet has the watcher see the changes of the file held by fd again,
// before it becomes a file under a name. Should the kernel refuse, the
// host's changes to that file show only when the kernel's cache of it
// expires.
func (w *watcher) unquiet(fd int) {
	if err := w.Unquiet(fd); err != nil {
		w.fs.logf("watch BACKING: cannot stop ignoring a temp: %v", err)
	}
}

// Changed queues what the kernel must forget after name in dir changed in
// BACKING: for a change of names, the name (which may now lead elsewhere,
// or nowhere) and the directory's listing and attributes; for a change of
// content or attributes, the child's cached attributes and pages. An empty
// name is the directory itself.
func (w *watcher) Changed(dir *Node, name string, names, content bool) {
	q := w.fs.notify
	in := dir.EmbeddedInode()
	if name == "" {
		q.inode(in)
		return
	}
	if hiddenName(name) {
		return
	}
	if names {
		q.entry(in, name)
	}
	if content {
		lockorder.GoFuse("Inode.GetChild")
		if child := in.GetChild(name); child != nil {
			q.inode(child)
		}
	}
}

// Lost has the kernel forget everything: changes may have gone unseen.
func (w *watcher) Lost(err error) {
	if err != nil {
		w.fs.logf("watch BACKING: %v; forgetting everything the kernel cached", err)
	}
	w.fs.notify.Everything()
}
