package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/journal"
	"github.com/realm-dev/realm/locks"
)

// The journal of changes (Options.Journal): each op appends its record
// through FS.journal (fusefs/journaling), built here from what it judged.

// journalRecord is a record of op on path (a workspace path) by the
// caller of ctx, its owner written as the audit log writes it.
func (f *FS) journalRecord(ctx context.Context, op journal.Op, path string) journal.Record {
	return journal.Record{Owner: string(f.owner(ctx)), Op: op, Path: path}
}

// JournalChange is the journal's intent of a commit
// (writeengine.Journal): see there.
func (h engineHost) JournalChange(ctx context.Context, op journal.Op, owner locks.Owner, rel string, before *unix.Stat_t, after *journal.ID, keep int) (func(error), syscall.Errno) {
	rec := journal.Record{Owner: string(owner), Op: op, Path: rel, Before: journal.ObjectOf(before), After: after}
	return h.f.journal.Commit(ctx, rec, keep)
}
