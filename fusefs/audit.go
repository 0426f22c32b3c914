package fusefs

import (
	"context"
	"encoding/json"
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
}

// Auditor writes one JSON line per refusal. Writes are serialised so lines
// never interleave; a failed write is counted, never fatal to the request.
type Auditor struct {
	mu     sync.Mutex
	w      io.Writer
	failed int
	// Owner names the lock owner of a caller, when the mount knows one.
	Owner func(pid uint32) string
}

// NewAuditor writes events to w (an O_APPEND file, typically).
func NewAuditor(w io.Writer) *Auditor { return &Auditor{w: w} }

// Record writes the event for a refusal of op on path.
func (a *Auditor) Record(ctx context.Context, op, path string, code errcode.Code, errno syscall.Errno) {
	c := caller(ctx)
	ev := Event{Time: time.Now().UTC(), Op: op, Path: path, Code: code, Errno: errnoName(errno), Pid: c.Pid, Uid: c.Uid}
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
	default:
		return e.Error()
	}
}
