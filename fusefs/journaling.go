package fusefs

import (
	"context"

	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
)

// The journal of changes (Options.Journal): each op appends its record
// through FS.journal (fusefs/journaling), built here from what it judged.

// journalRecord is a record of op on path (a workspace path) by owner,
// written as the audit log writes it: the caller of ctx's, resolved here
// where the caller has not ("") and only for a mount that keeps a journal
// (each resolution polls the caller's pidfd).
func (f *FS) journalRecord(ctx context.Context, owner locks.Owner, op journal.Op, path string) journal.Record {
	if owner == "" && f.journal.On() {
		owner = f.owner(ctx)
	}
	return journal.Record{Owner: string(owner), Op: op, Path: path}
}

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
