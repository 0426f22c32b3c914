package fusefs

// protocolEnded reports, where the owner's write ends, the first event of
// it that the write protocol did not accept (writeproto.Write.Err): the
// machine decided on a state the file was not in, a bug of this package's
// calling sequence that no caller hears of. One line in the daemon's log,
// which carries writeproto.Marker: the e2e harness and this package's
// tests fail on it. Logged here, not as it happens: where the violation
// happens the caller may hold locks that naming the file (place) must not
// be taken under. The caller holds w.entry's lock.
func (w *pendingWrite) protocolEnded() {
	if err := w.m.Err(); err != nil {
		w.node.fsys.logf("%v (the write of %s)", err, w.place())
	}
}
