package fusefs

import "context"

// Views of a file being written: the committed file for every other
// owner, the temp for its writer, one size per kernel inode; how a node's
// opens keep them apart is package nodeopens' (its doc says why). Here:
// whose view a handle that go-fuse lends a stat shows.

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
// and to the owner of a write with uncommitted bytes of the file (whose
// handles may be on another node, one retired since) where that answer
// cuts no reader short (nodeopens.Set.OwnerViewFits); where it would,
// another owner's handle retires the node (writtenElsewhere).
func (h *readHandle) answersFor(ctx context.Context) bool {
	f := h.node.fsys
	if h.key != h.node.key() {
		return false
	}
	// The node's own count first: a reader by the kernel's size (the
	// common kind) answers without a look into the lock table.
	if !h.node.opens.OwnerViewFits() || !f.writing(h.key) {
		return true
	}
	w := f.ownWrite(ctx, h.key)
	if w == nil {
		return true
	}
	uncommitted := w.Uncommitted()
	w.Entry().Unlock()
	return !uncommitted
}
