package journal

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// ControlName is the daemon's control socket in the journal directory
// (mode 0700, the daemon's user's): `realmfs journal undo` on a mountpoint
// asks the daemon, which holds the journal, to undo.
const ControlName = "control.sock"

// Listen listens on the journal's control socket, replacing one a killed
// daemon left: only the journal's writer (LOCK held) listens there.
func (j *Journal) Listen() (*net.UnixListener, error) { return dirfd.Listen(j.dir, ControlName) }

// Unlisten removes the control socket's name (after the listener's Close).
func (j *Journal) Unlisten() error {
	if err := dirfd.Unlink(j.dir, ControlName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// DialControl connects to the control socket of the daemon that holds the
// journal r reads.
func (r *Reader) DialControl() (*net.UnixConn, error) { return dirfd.Dial(r.dir, ControlName) }
