package fusefs

import (
	"context"
	"time"
)

// Views of a file being written. While an owner writes a file, two
// versions of it exist: the file as committed, which every other owner
// reads, and the owner's temp. The kernel keeps one size per inode, and it
// acts on it: a read through the page cache stops there, an O_APPEND write
// starts there, lseek(SEEK_END) and mmap use it. Whatever the daemon last
// answered (a lookup, any process's stat) becomes that size. So:
//
//   - A node serves the kernel one version through its cache. A write
//     open on a node whose readers pass through or read through the page
//     cache retires it (Node.retire): the writer meets the file on a new
//     node, the readers keep the version they opened. Plain readers that
//     open while the node has a pending write's handles (sharedOpen) read
//     direct: no read of theirs stops at the writer's size.
//   - Attributes are the caller's owner's view: the temp's for the owner
//     writing, the committed file's for everyone else, whichever handle
//     go-fuse lends a stat by path. While the node has write handles they
//     are not cached (Node.attrValid), so the kernel asks again, with the
//     asking process, before each stat and each lseek(SEEK_END); but for
//     a CREATE's answer, which is every owner's view (createdAttrValid).
//   - An O_APPEND write is placed at the end of the temp by the daemon
//     (writeHandle.Write, for a handle opened O_APPEND), not at the size the kernel last heard of.
//   - A writer and a reader are admitted to a node in one step each
//     (admitShared, admitReader): a passthrough reader admitted beside a
//     writer would make the kernel fail the writer's open after the
//     daemon made its handle (and such a handle's O_TRUNC must then not be
//     committed: writeHandle.Release).
//   - A retire costs an ESTALE, which the kernel retries once. A file
//     written now keeps new readers off passthrough for retireHold, so that
//     the next write open need not retire again; a node a lookup made for
//     the file a commit was replacing catches up with the commit instead of
//     answering ESTALE (FS.catchUp, by generation: inode numbers are
//     reused at once); readers that all read direct share a node across
//     versions (admitReader).
//   - A node whose name a rename replaced answers open and stat with
//     ESTALE, not ENOENT: the kernel looks the name up again, and a reader
//     racing an editor's save by rename never misses the file.
//
// Under saves by rename every few milliseconds an open can still meet two
// stale nodes in a row and fail with ESTALE: the kernel retries once.
// What is left: a mapping faults against the size the kernel last heard
// of. A shared mmap of a file being written may meet the committed size
// (another owner's stat), and a reader's mmap of a file that a commit
// shrinks gets SIGBUS past the new end, as natively when a file is
// truncated under a mapping.

// answersFor reports whether the write handle's content (withFd) is the
// view of the file the caller should see; if not, the caller is told
// through its owner's view instead (Node.stat by name). A write handle
// shows the owner's write to its owner only.
func (h *writeHandle) answersFor(ctx context.Context) bool {
	return h.node.fsys.owner(ctx) == h.file.Pending().Entry().Owner()
}

// answersFor reports whether the read handle's own fd is the view of the
// file the caller should see; if not, the caller is told through its
// owner's view instead (Node.stat by name). A read handle shows the file
// as it opened it, except when a commit has replaced that file since (the
// node stands for the new one: go-fuse lends the node's first open handle
// to a stat by path, and the kernel sends fstat(2) without one, so the old
// reader's size would become that of every later open of the new content)
// and to the owner of a write in progress on a node in flux, to which
// go-fuse lent it for a stat by name.
func (h *readHandle) answersFor(ctx context.Context) bool {
	f := h.node.fsys
	if h.key != h.node.key() {
		return false
	}
	if !h.node.inFlux() {
		return true
	}
	w := f.ownWrite(ctx, h.node.key())
	if w == nil {
		return true
	}
	uncommitted := w.Uncommitted()
	w.Entry().Unlock()
	return !uncommitted
}

// createdAttrValid is how long the kernel may keep the attributes of the
// file n that a CREATE just made (st). The node is in flux from here, but
// every owner's view of the file is the same, empty, until its creator
// changes it, and each change reaches the kernel's cache: a write
// invalidates the size and times it keeps (as after any write), a
// truncate, chmod or utimens answers with attributes not cached
// (attrValid). So the entry's may be kept, which spares the GETATTR of the
// fstat that follows open(2) in Go's os.OpenFile, cp and tar. A created
// file never has a set-ID bit that a write would clear (hostmode.go).
func createdAttrValid(n *Node) time.Duration {
	if n.isRetired() {
		return n.attrValid()
	}
	return n.fsys.attrTimeout
}
