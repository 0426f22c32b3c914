package journal

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Restore puts the version change seq kept back at name in the directory
// dir, journaled as rec (an undo's change; After is set here: the kept
// object's identity): it appends rec's intent, then renames kept/<seq> to
// the name, and ends the change. With keep (an O_PATH fd of what name
// holds now, as Begin takes it) the rename replaces that object, kept
// first by link as kept/<rec's seq>, in one atomic step: a crash leaves
// either version at the name, each kept or in place. Without it
// (NoKeep) the name must be free (RENAME_NOREPLACE).
//
// The object leaves kept/ rather than being linked out of it, so that it
// comes back with the link count it had: the engine commits a file with
// several links in place. The record of change seq then says kept while
// kept/<seq> is gone; a reader finds the object at the name it came back
// to, by identity.
func (j *Journal) Restore(rec Record, seq uint64, keep int, dir int, name string) (uint64, error) {
	var st unix.Stat_t
	if err := dirfd.Lstat(j.kept, keptEntry(seq), &st); err != nil {
		return 0, fmt.Errorf("journal: the version change %d kept: %w", seq, err)
	}
	id := ID{st.Dev, st.Ino}
	rec.After = &id
	c, err := j.Begin(rec, keep)
	if err != nil {
		return 0, err
	}
	if keep != NoKeep {
		err = dirfd.Rename(j.kept, keptEntry(seq), dir, name, 0)
	} else {
		err = moveNoReplace(j.kept, keptEntry(seq), dir, name)
	}
	if err != nil {
		return c.seq, errors.Join(err, c.Abort())
	}
	return c.seq, c.Done(nil)
}
