package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/fusefs/kernelnotify"
)

// notifier is the mount's kernel notifier (fusefs/kernelnotify), under the
// names the rest of fusefs calls it by: entry and inode queue what the
// kernel must forget of a name or an inode the mount changed where the
// kernel cannot know, or the watcher saw changed behind the mount.
type notifier struct{ *kernelnotify.Notifier }

func (q *notifier) entry(dir *fs.Inode, name string) { q.Entry(dir, name) }

func (q *notifier) inode(n *fs.Inode) { q.Inode(n) }

// newNotifier starts the notifier of f's mount. Unless whenBusy (tests:
// they wait in the kernel), an entry invalidation waits while its
// directory has a request in progress that the kernel sent holding the
// directory's lock (Node.busy).
func newNotifier(f *FS, whenBusy bool) *notifier {
	busy := func(dir *fs.Inode) bool {
		n := asNode(dir)
		return n != nil && n.busy.Load() > 0 && !whenBusy
	}
	return &notifier{kernelnotify.New(f.root.EmbeddedInode(), busy)}
}
