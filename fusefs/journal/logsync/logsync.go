// Package logsync makes a journal's appends durable as its filesystem
// allows: the system calls of one group commit's round (Policy.Round)
// and which intents are written through rather than flushed
// (Policy.Through). fusefs/journal decides when a round runs (syncTo);
// this package decides what it does.
//
// How an intent is made durable (journal.Options.Durable): by a group
// commit (the journal's syncTo), one caller at a time syncing everything
// appended until it starts. A round either flushes (the intent durable:
// fdatasync, and kept/'s fsync where a link was made) or, on a filesystem
// where every fsync flushes the device after what was written before it
// (FlushesCover: ext4), writes through: the intent's pages are written to the device and
// waited for (dirfd.WriteOut), and the next flush of the filesystem, by
// whoever issues it, makes them durable.
//
// Write-through is for the intents of objects made empty (create, mkdir:
// the journal's writeThroughOps): the change those record is a name for an empty object,
// and what follows it durably is preceded by a flush that carries the
// intent. A created file's content lands by its commit, which with
// durability=full fsyncs the temp before renaming it in (or, on a
// journaled ext4 that orders renamed data, commits the rename in a jbd2
// transaction whose commit block is written after a flush): the create's
// intent, on the device already, is durable before the content is. A
// directory's entries are made by changes whose intents are flushed, or
// by creates whose commits flush. What a power loss can leave with no
// record is a name for an empty object whose first flush had not come:
// undoing the owner's changes then leaves that empty file or directory.
// A kill -9 of the daemon loses nothing: the pages are written.
//
// On ext4 with a jbd2 journal (Options.Ordered) an intent is carried: set
// in LOCK's attribute (fusefs/journal/carry) before the change, held with the
// ends and written with the next line, not written through. A change and
// a link into kept/ are metadata, made durable by jbd2's commits in the
// order they were made, so the attribute as set before them is durable
// with or before them, and Open appends what it carries past the log. An
// intent the carry cannot take (full, or the line too long) is written
// through, and the lines before it with it, which empties the carry: the
// intent written and waited for before the change, each commit block
// written after a flush that carries it. So no change, and no kept link,
// is durable before its intent.
//
// On ext4 an fsync always ends with a flush of the device's cache, or
// waits for a jbd2 commit whose flush is not yet issued
// (ext4_sync_file); other filesystems may answer an fsync with nothing to
// write without one, so there every intent is flushed.
package logsync

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// FlushesCover reports whether dir's filesystem is one whose fsyncs flush
// the device after what was written before them (ext4).
func FlushesCover(dir int) bool {
	var st unix.Statfs_t
	return dirfd.Statfs(dir, &st) == nil && st.Type == unix.EXT4_SUPER_MAGIC
}

// Policy is how a journal's writes are made durable on its filesystem:
// set at Open and read with no lock.
type Policy struct {
	// Covers: an fsync on the journal's filesystem flushes the device
	// after what was written before it (FlushesCover).
	Covers bool
	// Ordered: every intent is carried or written through
	// (journal.Options.Ordered on a filesystem whose flushes cover).
	Ordered bool
}

// Through reports whether an intent is written through rather than
// flushed: makesEmpty says it records the making of an empty object
// (create, mkdir), gen is the last link into kept/ it keeps (0: none).
func (p Policy) Through(makesEmpty bool, gen uint64) bool {
	return p.Ordered || p.Covers && gen == 0 && makesEmpty
}

// Round is one group commit's system calls on the log (fd, -1 for nothing
// to write) and kept/ (keptFd): the pages written through (!flush), or the
// log and, needKept, kept/ made durable.
func (p Policy) Round(flush, needKept bool, fd, keptFd int) error {
	switch {
	case !flush:
		return writeOut(fd)
	case needKept && p.Covers:
		// kept/'s fsync flushes the log's pages written before it: one
		// flush for both.
		if err := writeOut(fd); err != nil {
			return err
		}
		return syncKept(keptFd)
	case needKept:
		return syncBoth(fd, keptFd)
	}
	return syncLog(fd)
}

// writeOut writes the log's pages through to the device (fd -1: none to
// write).
func writeOut(fd int) error {
	if fd < 0 {
		return nil
	}
	if err := dirfd.WriteOut(fd); err != nil {
		return fmt.Errorf("journal: writing the log out: %w", err)
	}
	return nil
}

// syncLog makes the log durable (fd -1: nothing to sync).
func syncLog(fd int) error {
	if fd < 0 {
		return nil
	}
	if err := dirfd.Fdatasync(fd); err != nil {
		return fmt.Errorf("journal: syncing the log: %w", err)
	}
	return nil
}

// syncKept makes kept/'s entries durable (keptFd: kept/ opened for
// reading).
func syncKept(keptFd int) error {
	if err := dirfd.Fsync(keptFd); err != nil {
		return fmt.Errorf("journal: syncing kept/: %w", err)
	}
	return nil
}

// syncBoth makes the log (fd) and kept/ durable, kept/'s fsync beside the
// log's fdatasync: measured, one Begin that keeps a link waits 260 µs so,
// 400 µs one after the other.
func syncBoth(fd, keptFd int) error {
	keptErr := make(chan error, 1)
	go func() { keptErr <- syncKept(keptFd) }()
	err := syncLog(fd)
	if kerr := <-keptErr; err == nil {
		err = kerr
	}
	return err
}
