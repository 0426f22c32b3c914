// Package carry keeps the journal's intents that are not yet on the
// device in an extended attribute of a file of the journal (its LOCK), so
// that on ext4 with a jbd2 journal an intent needs no write of its own to
// the device before the change it describes is made.
//
// Why that holds: jbd2 makes metadata changes durable in the order they
// were made, a running transaction whole or not at all, each commit after
// the one before it. Setting an attribute is a metadata change; the change
// an intent describes (a create, a rename, a link into kept/) is another,
// made after it. So whenever the change is durable, the attribute as it
// was set before the change is too, and recovery finds in it every intent
// the segment lost (docs/JOURNAL.md). The alternative, the intent's page
// written through to the device and waited for before each change, costs
// a device round trip a change (docs/PERFORMANCE.md).
//
// A Carry holds the lines it carries in order, each with the position in
// the log where it was written (0 while the journal still holds it in
// memory). A line leaves the attribute once the log is on the device past
// it: Add drops those first. A line that does not fit is not carried; the
// journal writes it through as before, which puts every line before it on
// the device too and empties the carry.
package carry

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Attr is the attribute the lines are carried in.
const Attr = "user.realm.carry"

// DefaultMax is how many bytes a Carry holds at most: within one ext4
// attribute block (4 KiB, less its header and the entry's) with room for
// others, about fifteen intents of usual paths.
const DefaultMax = 3 << 10

// Carry is the attribute of one open file and the lines it holds. It has
// no lock of its own: the journal calls it under its mutex.
type Carry struct {
	fd    int
	max   int
	off   bool // the filesystem refused the attribute: carry nothing more
	buf   []byte
	lines []carried
}

// carried is one line's length and where the log holds it (0: held).
type carried struct {
	n   int
	pos uint64
}

// New is a Carry in fd's attribute, a file open for writing, empty.
func New(fd int) *Carry { return &Carry{fd: fd, max: DefaultMax} }

// Add carries b, an intent's line, with the lines still carried but for
// those the log holds on the device (pos at or below onDevice), and
// reports whether it did: false where b does not fit, or the filesystem
// refused the attribute (then it stays as it was, and b must be written
// through).
func (c *Carry) Add(b []byte, onDevice uint64) bool {
	if c.off {
		return false
	}
	c.drop(onDevice)
	if len(c.buf)+len(b) > c.max {
		return false
	}
	n := len(c.buf)
	c.buf = append(c.buf, b...)
	err := dirfd.Fsetxattr(c.fd, Attr, c.buf)
	if err != nil {
		c.buf = c.buf[:n]
		if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ERANGE) {
			c.max = n // this filesystem's room is less: carry less
		} else {
			c.off = true // no user attributes here (ENOTSUP), or not ours to set
		}
		return false
	}
	c.lines = append(c.lines, carried{n: len(b)})
	return true
}

// Written notes that the lines held were written to the log, ending at
// pos.
func (c *Carry) Written(pos uint64) {
	for i := len(c.lines) - 1; i >= 0 && c.lines[i].pos == 0; i-- {
		c.lines[i].pos = pos
	}
}

// Len is the number of lines carried.
func (c *Carry) Len() int { return len(c.lines) }

// drop lets go of the lines the log holds on the device. The attribute
// keeps them until the next Add sets it: recovery skips the lines the log
// has.
func (c *Carry) drop(onDevice uint64) {
	k, bytes := 0, 0
	for k < len(c.lines) && c.lines[k].pos != 0 && c.lines[k].pos <= onDevice {
		bytes += c.lines[k].n
		k++
	}
	if k == 0 {
		return
	}
	c.lines = append(c.lines[:0], c.lines[k:]...)
	c.buf = append(c.buf[:0], c.buf[bytes:]...)
}

// Read returns the lines fd's attribute carries (nil: none).
func Read(fd int) ([]byte, error) {
	b, err := dirfd.Fgetxattr(fd, Attr)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	return b, err
}

// Clear empties fd's attribute, once recovery has appended what it
// carried to the log and made it durable.
func Clear(fd int) error {
	b, err := Read(fd)
	if err != nil || len(b) == 0 {
		return err
	}
	return dirfd.Fsetxattr(fd, Attr, nil)
}
