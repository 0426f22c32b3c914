package undo

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// Undo puts an object's owner, mode and times back only on the object as
// the change left it: its ctime then (journal.Record.AfterCtime), which
// the kernel sets at every change of an inode and at its making, and which
// no one but root can set. An object its inode number was freed to since
// (a host process removed the file and made one that got its number), or
// one changed since by a write, a chmod or a link the journal does not
// hold, has another: giving it the old owner and mode could make an
// attacker's file root's and set-user-ID. Undo's own steps change ctimes
// too, so each step notes the ctime it left on every object it touched
// (touched), which a later step of the same run takes for the change's.
// A directory is not checked: every name made or removed in it moves its
// ctime, and its set-group-ID bit lends no one a privilege.

// unchangedSince checks that obj, whose metadata r changed, is as the
// change, or this undo since, left it.
func (u *undoer) unchangedSince(r *journal.Record, obj *journal.Object) error {
	if r.AfterCtime.IsZero() || obj.Type == "dir" || obj.Ctime.Equal(r.AfterCtime) {
		return nil
	}
	if t, ok := u.touched[obj.ID()]; ok && obj.Ctime.Equal(t) {
		return nil
	}
	return fmt.Errorf("%s changed since the change (its ctime): made anew under the same inode number, or changed from outside the mount", r.Path)
}

// pin opens the objects at r's names (O_PATH fds; -1 for none) before a
// step, for touch to read the ctimes the step leaves on them wherever it
// moves them (into kept/, say).
func (u *undoer) pin(r *journal.Record) []int {
	var fds []int
	for _, p := range namesOf(r) {
		dir, name, err := dirfd.WalkParent(u.root, p)
		if err != nil {
			continue
		}
		if fd, err := dirfd.OpenPath(dir, name); err == nil {
			fds = append(fds, fd)
		}
		dirfd.Close(dir)
	}
	return fds
}

// touch notes the ctimes a step left: on the objects pinned before it and
// on those at r's names after it (a version put back).
func (u *undoer) touch(r *journal.Record, pinned []int) {
	for _, fd := range pinned {
		if o := fdObject(fd); o != nil {
			u.touched[o.ID()] = o.Ctime
		}
	}
	for _, p := range namesOf(r) {
		if dir, _, obj, err := u.at(p); err == nil {
			dirfd.Close(dir)
			if obj != nil {
				u.touched[obj.ID()] = obj.Ctime
			}
		}
	}
}

// fdObject is the object fd holds (nil if it cannot be read).
func fdObject(fd int) *journal.Object {
	var st unix.Stat_t
	if dirfd.Fstat(fd, &st) != nil {
		return nil
	}
	return journal.ObjectOf(&st)
}

// closeAll closes fds.
func closeAll(fds []int) {
	for _, fd := range fds {
		dirfd.Close(fd)
	}
}
