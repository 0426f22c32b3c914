package fusefs

import "errors"

// errStop ends a walk early.
var errStop = errors.New("walk stopped")
