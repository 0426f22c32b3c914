package fusefs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"realm/errcode"
)

// Event is one audit line: why a process on the mount was refused.
type Event struct {
	Time  time.Time    `json:"time"`
	Op    string       `json:"op"`
	Path  string       `json:"path"` // workspace-relative
	Code  errcode.Code `json:"code"`
	Errno string       `json:"errno"`
	Pid   uint32       `json:"pid"`
	Uid   uint32       `json:"uid"`
	Owner string       `json:"owner,omitempty"`
	// Cause is the error behind a failure the caller saw as Errno (a
	// commit's ENOSPC behind its EIO, say).
	Cause string `json:"cause,omitempty"`
}

// Auditor writes one JSON line per refusal. Writes are serialised so lines
// never interleave; a failed write is counted and reported to Logf, never
// fatal to the request.
type Auditor struct {
	mu     sync.Mutex
	w      io.Writer
	failed int
	// Owner names the lock owner of a caller, when the mount knows one.
	Owner func(pid uint32) string
	// Logf, if set, hears of lines that could not be written: the first,
	// and every 1000th after it.
	Logf func(format string, args ...any)
}

// NewAuditor writes events to w (an O_APPEND file, typically).
func NewAuditor(w io.Writer) *Auditor { return &Auditor{w: w} }

// Record writes the event for a refusal of op on path.
func (a *Auditor) Record(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno) {
	a.RecordCause(ctx, op, path, code, errno, nil)
}

// RecordCause is Record for a failure with an underlying cause.
func (a *Auditor) RecordCause(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno, cause error) {
	c := caller(ctx)
	ev := Event{Time: time.Now().UTC(), Op: op, Path: path, Code: code, Errno: errnoName(errno), Pid: c.Pid, Uid: c.Uid}
	if cause != nil {
		var e syscall.Errno
		if errors.As(cause, &e) {
			ev.Cause = errnoName(e)
		} else {
			ev.Cause = cause.Error()
		}
	}
	if a.Owner != nil {
		ev.Owner = a.Owner(c.Pid)
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.w.Write(line); err != nil {
		a.failed++
		if a.Logf != nil && a.failed%1000 == 1 {
			a.Logf("audit log: %v (%d lines not written)", err, a.failed)
		}
	}
}

// Failed is how many events could not be written.
func (a *Auditor) Failed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EBUSY:
		return "EBUSY"
	case syscall.EIO:
		return "EIO"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EDQUOT:
		return "EDQUOT"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOSYS:
		return "ENOSYS"
	case syscall.EOPNOTSUPP:
		return "EOPNOTSUPP"
	case syscall.ESTALE:
		return "ESTALE"
	case syscall.EMFILE:
		return "EMFILE"
	default:
		return e.Error()
	}
}
