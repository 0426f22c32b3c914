package journal

import (
	"errors"
	"syscall"
)

// ErrNoRoom is what a RoomError is: the journal could not record a change
// without taking blocks BACKING's filesystem keeps for root.
var ErrNoRoom = errors.New("journal: no room left for a writer that is not root: the record of the change would take root's reserve (the journal drops its oldest records to make room)")

// RoomError refuses a change whose intent would grow the journal past the
// room Options.Room gives: the change is ENOSPC, as a full disk's, and
// the journal's oldest records are dropped to make room for the next one
// (Prune, squeezed). First is true on the first refusal of a burst (one
// audit line a burst).
type RoomError struct{ First bool }

func (e *RoomError) Error() string { return ErrNoRoom.Error() }

// Is makes a RoomError ErrNoRoom and ENOSPC to errors.Is.
func (e *RoomError) Is(target error) bool {
	return target == ErrNoRoom || target == syscall.ENOSPC
}
