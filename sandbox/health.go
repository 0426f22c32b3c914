package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/realm-dev/realm/errcode"
)

// Health is what is live of a session now, as opposed to what its record
// remembers: a record stays "active" after its container exits or the
// realmfs under it dies, so session ls, inspect and exec ask instead.
type Health struct {
	// Status is the session's state as it is: the record's creating or
	// stopping; active when the sandbox runs and the mount answers; dead
	// when either is gone; unknown when the runtime could not be asked.
	Status string `json:"status"`
	// Sandbox is the sandbox's state as its runtime reports it now:
	// running, exited, gone, … ("none" before it has one, "unknown" with
	// SandboxError when the runtime cannot be asked).
	Sandbox      string `json:"sandbox"`
	SandboxError string `json:"sandboxError,omitempty"`
	// Mount is "answering" when the realmfs mount is there and its daemon
	// answers, else "gone".
	Mount string `json:"mount"`
}

// Reason says in a few words why a session is not active ("" if it is).
func (h Health) Reason() string {
	var why string
	if h.Sandbox != "running" && h.Sandbox != "unknown" {
		why = "sandbox " + h.Sandbox
	}
	if h.Mount != "answering" {
		if why != "" {
			why += ", "
		}
		why += "mount " + h.Mount
	}
	return why
}

// Stater is implemented by runtimes that can say what state a sandbox is
// in (Podman: running, exited, …, or gone); the others are asked as
// Probers.
type Stater interface {
	State(ctx context.Context, id string) (string, error)
}

// Health asks rec's runtime how its sandbox is and probes its mount.
func (m *Manager) Health(ctx context.Context, rec *Record) Health {
	h := Health{Sandbox: "none", Mount: "gone"}
	if m.mountAlive(rec.Mount) {
		h.Mount = "answering"
	}
	if rec.ContainerID != nil {
		s, err := m.sandboxState(ctx, rec)
		if err != nil {
			s, h.SandboxError = "unknown", errMessage(err)
		}
		h.Sandbox = s
	}
	switch {
	case rec.State != StateActive:
		h.Status = string(rec.State)
	case h.Sandbox == "unknown" && h.Mount == "answering":
		h.Status = "unknown"
	case h.Sandbox == "running" && h.Mount == "answering":
		h.Status = string(StateActive)
	default:
		h.Status = "dead"
	}
	return h
}

// sandboxState asks rec's runtime how its sandbox is.
func (m *Manager) sandboxState(ctx context.Context, rec *Record) (string, error) {
	rt, err := m.Runtime(ctx, rec.Runtime)
	if err != nil {
		return "", err
	}
	if s, ok := rt.(Stater); ok {
		return s.State(ctx, *rec.ContainerID)
	}
	pr, ok := rt.(Prober)
	if !ok {
		return "", fmt.Errorf("the %s runtime cannot tell", rec.Runtime)
	}
	running, err := pr.Running(ctx, *rec.ContainerID)
	if err != nil {
		return "", err
	}
	if running {
		return "running", nil
	}
	return "not running", nil
}

// mountAlive is Alive, or the test's stand-in.
func (m *Manager) mountAlive(mnt string) bool {
	if m.MountAlive != nil {
		return m.MountAlive(mnt)
	}
	return Alive(mnt)
}

// deadSession is the error of a command that needs session rec live but
// found what (its sandbox or mount) gone: REALM_NOT_ACTIVE, saying what to
// do, and never the runtime's own words (which stay in the cause).
func deadSession(rec *Record, what string, cause error) error {
	return errcode.Wrap(errcode.RealmNotActive, cause,
		"session %s is dead: %s; run `realmctl reap` to clean up dead sessions, or `realmctl session destroy %s`",
		rec.ID, what, rec.ID)
}

// errMessage is a catalogued error's own message (without its cause), or
// err's text.
func errMessage(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
