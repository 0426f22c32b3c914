// Package errcode is realm's error catalogue: the codes that cross every
// boundary (the mount, the CLI, the audit log), the errno each maps to on the
// mount, and the exit status each gives a command. It imports nothing of the
// project so that every package may use it.
//
// Message text of a child process never becomes an error here: an Error
// carries a code and realm's own words, and wraps the underlying cause with
// %w for logs and errors.Is.
package errcode

import (
	"errors"
	"fmt"
	"syscall"
)

// Code names one entry of the catalogue.
type Code string

// The catalogue. docs/threat-model.md documents each code (the table "What a process
// on the mount sees" and realmctl's table of exit codes); keep them in step.
const (
	PathEscape           Code = "PATH_ESCAPE"
	ProtectedPathDenied  Code = "PROTECTED_PATH_DENIED"
	CredentialPathDenied Code = "CREDENTIAL_PATH_DENIED"
	LockConflict         Code = "LOCK_CONFLICT"
	WriteNotAtomic       Code = "WRITE_NOT_ATOMIC"
	SchemaInvalid        Code = "SCHEMA_INVALID"
	RealmNotActive       Code = "REALM_NOT_ACTIVE"
	ToolTimeout          Code = "TOOL_TIMEOUT"
	RealmStopping        Code = "REALM_STOPPING"
	DeviceNodeDenied     Code = "DEVICE_NODE_DENIED"

	// WriterKilledCommitted and WriterKilledRecovered are not refusals: they
	// record what became of the bytes of a writer that a signal killed
	// before it closed the file (no process hears of it, so the audit log
	// does). Committed: nothing old was torn (the file was empty, or the
	// writer only appended). Recovered: the file is byte-identical and the
	// bytes are kept in a copy beside it.
	WriterKilledCommitted Code = "WRITER_KILLED_COMMITTED"
	WriterKilledRecovered Code = "WRITER_KILLED_RECOVERED"
	// ResourceLimit: one lock owner holds as many open files on the mount
	// as it may (max_fds_per_owner), so that it cannot take every
	// descriptor the daemon has from the other owners.
	ResourceLimit Code = "RESOURCE_LIMIT"

	// XattrNotKept is not a refusal either: a commit replaced a file's
	// content, but the new content lacks extended attributes the file had
	// (an ACL, a security label) that the daemon could not set on it. The
	// bytes are committed; the line names what was not kept.
	XattrNotKept Code = "XATTR_NOT_KEPT"

	// PrivilegeDenied: a change through the mount that would grant a
	// privilege on the host where BACKING lies (a set-ID bit, a file
	// capability or another privileged xattr).
	PrivilegeDenied Code = "PRIVILEGE_DENIED"

	// JournalFailed: the journal of changes could not record a change
	// (its intent not appended or not durable, or what it replaces not
	// kept), so the change was not made (EIO): no change without its
	// record.
	JournalFailed Code = "JOURNAL_FAILED"
)

// Catalogue is every code, in the order the const block declares them:
// what a command that filters by code accepts (TestCatalogueIsTheConsts keeps it
// equal to the const block).
var Catalogue = []Code{
	PathEscape, ProtectedPathDenied, CredentialPathDenied, LockConflict,
	WriteNotAtomic, SchemaInvalid, RealmNotActive, ToolTimeout, RealmStopping,
	DeviceNodeDenied, WriterKilledCommitted, WriterKilledRecovered,
	ResourceLimit, XattrNotKept, PrivilegeDenied, JournalFailed,
}

// Known reports whether c is in the catalogue.
func Known(c Code) bool {
	for _, k := range Catalogue {
		if k == c {
			return true
		}
	}
	return false
}

// Errno is what a process on the mount sees for the code. Codes that never
// reach the mount map to EIO so that a mistake fails closed.
func (c Code) Errno() syscall.Errno {
	switch c {
	case PathEscape, CredentialPathDenied, ProtectedPathDenied:
		return syscall.EACCES
	case LockConflict:
		return syscall.EBUSY
	case DeviceNodeDenied, PrivilegeDenied:
		return syscall.EPERM
	case ResourceLimit:
		return syscall.EMFILE
	default:
		return syscall.EIO
	}
}

// Exit statuses of realm's commands. 124 follows timeout(1); 69 and 75 are
// sysexits' EX_UNAVAILABLE and EX_TEMPFAIL.
const (
	ExitOK       = 0
	ExitFailure  = 1
	ExitUsage    = 2
	ExitTimeout  = 124
	ExitInactive = 69
	ExitStopping = 75
)

// ExitStatus is the exit status a command gives when it fails with the code.
func (c Code) ExitStatus() int {
	switch c {
	case SchemaInvalid:
		return ExitUsage
	case ToolTimeout:
		return ExitTimeout
	case RealmNotActive:
		return ExitInactive
	case RealmStopping:
		return ExitStopping
	default:
		return ExitFailure
	}
}

// Error is an error with a catalogue code.
type Error struct {
	Code    Code
	Message string // realm's own words; never a child's output
	Err     error  // the cause, if any
}

// New returns an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with a message that wraps err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, errcode.LockConflict) style checks work through
// wrapping: target may be a *Error with only Code set.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Err == nil && t.Code == e.Code
}

// Of returns the code of the first *Error in err's chain, and false if there
// is none.
func Of(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return "", false
}

// ExitStatusOf maps any error to a command's exit status: 0 for nil, the
// code's status for a catalogued error, 1 otherwise.
func ExitStatusOf(err error) int {
	if err == nil {
		return ExitOK
	}
	if c, ok := Of(err); ok {
		return c.ExitStatus()
	}
	return ExitFailure
}
