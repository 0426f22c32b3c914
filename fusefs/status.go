package fusefs

// MountStatus is what the mount holds now (realmfs status): the handles
// each owner has open, the write locks and whose they are, and the
// refusals so far.
type MountStatus struct {
	// Handles: open file and directory handles per owner (counted where
	// descriptors are bounded: max_fds_per_owner; nil otherwise).
	Handles map[string]int `json:"handles,omitempty"`
	// Locks: the lock table's holds, in no order.
	Locks []LockStatus `json:"locks"`
	// Refusals: refusals audited since the mount.
	Refusals uint64 `json:"refusals"`
	// Scanning: the mount-time scan (credentials, crash temps) is running;
	// Scanned, the entries it has walked so far.
	Scanning bool  `json:"scanning"`
	Scanned  int64 `json:"scanned"`
}

// LockStatus is one owner's hold of one file.
type LockStatus struct {
	Path        string `json:"path"` // "" where no write of the engine's names it yet
	Owner       string `json:"owner"`
	Mode        string `json:"mode"`        // write, append
	Uncommitted bool   `json:"uncommitted"` // bytes not yet committed (a temp)
	Handles     int    `json:"handles"`     // the leases: open handles that write
}

// Status reports what the mount holds now.
func (f *FS) Status() MountStatus {
	st := MountStatus{Refusals: f.opts.Audit.Refusals(), Scanning: f.scanActive.Load() > 0, Scanned: f.guard.ScanEntries()}
	if h := f.fds.HandlesByOwner(); h != nil {
		st.Handles = map[string]int{}
		for o, n := range h {
			st.Handles[string(o)] = n
		}
	}
	for _, h := range f.writeLocks.Holds() {
		l := LockStatus{Owner: string(h.Owner), Mode: "append", Handles: h.Leases}
		if h.Write {
			l.Mode = "write"
		}
		l.Path, l.Uncommitted, _ = f.engine.Describe(h.Entry)
		st.Locks = append(st.Locks, l)
	}
	return st
}
