package writeproto

// OpenedAs reports whether a handle of the write other than h was opened
// by h's opener with kind (Open.Kind). A close's scan of the opener's
// descriptors uses it to tell which descriptors another open explains.
func (w *Write) OpenedAs(h *Handle, kind uint32) bool {
	for _, x := range w.hs {
		if x != h && x.open.Opener == h.open.Opener && x.open.Kind == kind {
			return true
		}
	}
	return false
}
