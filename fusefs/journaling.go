package fusefs

import (
	"context"

	"github.com/realm-dev/realm/fusefs/journal"
)

// The journal of changes (Options.Journal): each op appends its record
// through FS.journal (fusefs/journaling), built here from what it judged.

// journalRecord is a record of op on path (a workspace path) by the
// caller of ctx, its owner written as the audit log writes it.
func (f *FS) journalRecord(ctx context.Context, op journal.Op, path string) journal.Record {
	return journal.Record{Owner: string(f.owner(ctx)), Op: op, Path: path}
}
