package fusefs

import (
	"context"

	"github.com/realm-dev/realm/fusefs/requestnotes"
)

// requestNotes is what the mount's raw filesystem noted of the requests in
// progress (requestnotes.NotingFS, on a mount made by FS.Mount): FS.umasks,
// the caller's umask of each CREATE, MKDIR and MKNOD (umask.go); FS.writeIns,
// the file's flags at each WRITE (writeHandle.Write).
type requestNotes struct{ requestnotes.Notes }

// of returns the value noted for the request ctx serves; false for a call
// that did not come through the mount (the unit tests).
func (t *requestNotes) of(ctx context.Context) (uint32, bool) { return t.Of(ctx) }
