package fusefs

import "github.com/realm-dev/realm/locks"

// The journal of changes (Options.Journal): each op appends its record
// through FS.journal (fusefs/journaling), built from what it judged. Here
// is what the journal's commands of realmfs ask of the mount: who writes
// a file, a step of an undo run alone, whether a file is a credential.

// WriteHolder names the owner that holds the file (dev, ino) open for
// writing or appending (the lock table), if any.
func (f *FS) WriteHolder(dev, ino uint64) (string, bool) {
	o, ok := f.writeLocks.Holder(locks.Key{Dev: dev, Ino: ino})
	return string(o), ok
}

// Exclusively runs fn with the namespace lock held exclusively: no name
// operation and no commit's rename runs beside it, and none sees half of
// what fn changes in BACKING (an undo's step: fusefs/journal/undo). What
// fn changes reaches the kernel's caches as any change behind the mount
// does (the watcher, watch.go).
func (f *FS) Exclusively(fn func() error) error {
	unlock := f.nsLock(true)
	defer unlock()
	return fn()
}

// Credential reports whether the file at workspace path rel, of identity
// (dev, ino), is a credential as the mount judges one: by its path under
// the policy, or by its identity (a hard link to a credential under
// another name). realmfs journal diff withholds such a file's content.
func (f *FS) Credential(rel string, dev, ino uint64) bool {
	return f.guard.On() && (f.guard.Denied(rel) || f.guard.Creds.HasKey(locks.Key{Dev: dev, Ino: ino}))
}
