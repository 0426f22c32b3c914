package fusefs

import (
	"github.com/realm-dev/realm/fusefs/kernelnotify"
	"github.com/realm-dev/realm/internal/lockorder"
)

// watchSink is the Sink of the mount's watch.Watcher of BACKING's
// directories (FS.watch, keyed by their nodes): what it sees changed
// behind the mount becomes kernel invalidations (FS.notify), so that the
// kernel may cache names, attributes and listings for long (WatchedCache).
type watchSink struct{ notify *kernelnotify.Notifier }

// Changed queues what the kernel must forget after name in dir changed in
// BACKING: for a change of names, the name (which may now lead elsewhere,
// or nowhere) and the directory's listing and attributes; for a change of
// content or attributes, the child's cached attributes and pages. An empty
// name is the directory itself.
func (s watchSink) Changed(dir *Node, name string, names, content bool) {
	q := s.notify
	in := dir.EmbeddedInode()
	if name == "" {
		q.Inode(in)
		return
	}
	if hiddenName(name) {
		return
	}
	if names {
		q.Entry(in, name)
	}
	if content {
		lockorder.GoFuse("Inode.GetChild")
		if child := in.GetChild(name); child != nil {
			q.Inode(child)
		}
	}
}

// Lost has the kernel forget everything: changes may have gone unseen.
func (s watchSink) Lost() { s.notify.Everything() }
