package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// Manager runs the lifecycle of sessions: create, exec, destroy, list. The
// caller holds the state dir's lock around Create and Destroy (one realmctl
// owns the state dir at a time), so a record in StateCreating or
// StateStopping seen under the lock was left by a crash.
type Manager struct {
	Store  *Store
	Mounts *Mounts
	// Runtime returns the runtime called name, made on first use.
	Runtime func(ctx context.Context, name string) (Runtime, error)
	Now     func() time.Time
	// MountAlive probes a session's mount; nil is Alive. Tests set it.
	MountAlive func(mnt string) bool
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now().UTC()
}

// Create starts the session p describes, in the order that lets a crash at
// any step be finished by the reaper: record (creating, no container id),
// mount, sandbox (the id is recorded as soon as it is known), the proof that
// the sandbox's /workspace is the guarded mount (proveWorkspace), record
// (active). A failure after the record undoes what was done and deletes the
// record; if undoing fails, the record stays for destroy or reap.
func (m *Manager) Create(ctx context.Context, p *Plan) (*Record, error) {
	if err := m.Mounts.CheckPolicy(p.workspace, p.policy); err != nil {
		return nil, err
	}
	if p.req.Name != "" {
		if rec, _ := m.byName(p.req.Name); rec != nil {
			return nil, errcode.New(errcode.SchemaInvalid, "--name %q: session %s already has that name", p.req.Name, rec.ID)
		}
	}
	rt, err := m.Runtime(ctx, p.req.Runtime)
	if err != nil {
		return nil, err
	}
	id, err := NewID()
	if err != nil {
		return nil, err
	}
	rec := &Record{
		ID:        id,
		Name:      p.req.Name,
		State:     StateCreating,
		Runtime:   rt.Name(),
		Workspace: p.workspace,
		Mount:     m.Mounts.Path(p.workspace),
		Policy:    p.policy,
		Image:     p.req.Image,
		User:      p.user,
		Workload:  p.req.Workload,
		CreatedAt: m.now(),
	}
	for _, e := range p.egress {
		rec.Egress = append(rec.Egress, e.String())
	}
	if err := m.Store.Save(rec); err != nil {
		return nil, err
	}

	if _, err := m.Mounts.Acquire(ctx, p.workspace, p.policy); err != nil {
		return nil, m.undo(ctx, rec, rt, err)
	}
	cid, err := rt.Create(ctx, Spec{
		SessionID:  id,
		Name:       p.req.Name,
		Image:      p.req.Image,
		Workspace:  rec.Mount,
		Workload:   p.req.Workload,
		Egress:     p.egress,
		User:       p.user,
		SessionDir: m.Store.Dir,
	})
	if cid != "" {
		rec.ContainerID = &cid
	}
	if err != nil {
		return nil, m.undo(ctx, rec, rt, err)
	}
	if err := m.Store.Save(rec); err != nil { // the sandbox's id, as soon as it is known
		return nil, m.undo(ctx, rec, rt, err)
	}
	if err := proveWorkspace(ctx, rt, cid, rec.Mount, p.workspace); err != nil {
		return nil, m.undo(ctx, rec, rt, err)
	}
	rec.State = StateActive
	if err := m.Store.Save(rec); err != nil {
		return nil, m.undo(ctx, rec, rt, err)
	}
	return rec, nil
}

// undo tears down a half-made session and returns cause (with the teardown
// failure joined if there was one).
func (m *Manager) undo(ctx context.Context, rec *Record, rt Runtime, cause error) error {
	if err := m.teardown(ctx, rec, rt); err != nil {
		return errors.Join(cause, fmt.Errorf("session %s was left for destroy or reap: %w", rec.ID, err))
	}
	return cause
}

// Destroy ends a session in two phases: mark it stopping, remove the sandbox,
// release the mount, and only then delete the record. A failure part way
// leaves the record, so a later destroy or reap finishes the job.
func (m *Manager) Destroy(ctx context.Context, ref string) (*Record, error) {
	rec, err := m.Resolve(ref)
	if err != nil {
		return nil, err
	}
	rt, err := m.Runtime(ctx, rec.Runtime)
	if err != nil {
		return nil, err
	}
	if err := m.teardown(ctx, rec, rt); err != nil {
		return nil, err
	}
	return rec, nil
}

func (m *Manager) teardown(ctx context.Context, rec *Record, rt Runtime) error {
	rec.State = StateStopping
	if err := m.Store.Save(rec); err != nil {
		return err
	}
	// The sandbox is removed by name too: a crash may have come between the
	// runtime's create and the record of its id.
	if rec.ContainerID != nil {
		if err := rt.Destroy(ctx, *rec.ContainerID); err != nil {
			return err
		}
	}
	if err := rt.Destroy(ctx, ContainerName(rec.ID)); err != nil {
		return err
	}
	if err := m.releaseMount(rec); err != nil {
		return err
	}
	return m.Store.Delete(rec.ID)
}

// releaseMount unmounts rec's mount unless another session's record still
// names it: the records are the mount's reference count.
func (m *Manager) releaseMount(rec *Record) error {
	recs, err := m.Store.All()
	if err != nil {
		return err
	}
	for _, o := range recs {
		if o.ID != rec.ID && o.Mount == rec.Mount {
			return nil
		}
	}
	return m.Mounts.Release(rec.Mount)
}

// Exec runs a command in the session ref (an id or a name). A session that
// is not active, or whose sandbox cannot be reached, is REALM_NOT_ACTIVE;
// one whose mount or sandbox is gone says so and what to do (ExecReady,
// Dead).
func (m *Manager) Exec(ctx context.Context, ref string, req ExecRequest) (ExecResult, error) {
	rec, err := m.Resolve(ref)
	if err != nil {
		return ExecResult{}, err
	}
	if err := m.ExecReady(rec); err != nil {
		return ExecResult{}, err
	}
	rt, err := m.Runtime(ctx, rec.Runtime)
	if err != nil {
		return ExecResult{}, err
	}
	res, err := rt.Exec(ctx, *rec.ContainerID, req)
	if err != nil {
		return ExecResult{}, m.Dead(ctx, rec, err)
	}
	return res, nil
}

// ExecReady refuses an exec into rec before the runtime is asked: a record
// that is not active, or a mount that does not answer (the runtime would
// fail to enter /workspace with its own words, ENOTCONN and exit 125).
func (m *Manager) ExecReady(rec *Record) error {
	if rec.State != StateActive || rec.ContainerID == nil {
		return errcode.New(errcode.RealmNotActive, "session %s is %s, not active", rec.ID, rec.State)
	}
	if !m.mountAlive(rec.Mount) {
		return deadSession(rec, fmt.Sprintf("its realmfs mount %s does not answer", rec.Mount), nil)
	}
	return nil
}

// Dead turns a runtime's REALM_NOT_ACTIVE for rec into realm's dead-session
// error when the sandbox is indeed not running (asked again, so that a
// service that is down is not called a dead session); any other error is
// returned as it is.
func (m *Manager) Dead(ctx context.Context, rec *Record, err error) error {
	if code, _ := errcode.Of(err); code != errcode.RealmNotActive || rec.ContainerID == nil {
		return err
	}
	state, serr := m.sandboxState(ctx, rec)
	if serr != nil || state == "running" {
		return err
	}
	return deadSession(rec, "its sandbox "+shortID(*rec.ContainerID)+" is "+state, err)
}

// Resolve finds the record of ref, a session id or a session name. None is
// REALM_NOT_ACTIVE: there is no such session to reach.
func (m *Manager) Resolve(ref string) (*Record, error) {
	if ValidID(ref) {
		rec, err := m.Store.Load(ref)
		if err == nil || !errors.Is(err, ErrNoSession) {
			return rec, err
		}
	}
	rec, err := m.byName(ref)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errcode.Wrap(errcode.RealmNotActive, ErrNoSession, "no session %q", ref)
	}
	return rec, nil
}

func (m *Manager) byName(name string) (*Record, error) {
	recs, err := m.Store.All()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

// NamedRuntimes returns the runtimes the session records name: the ones a
// reap must be able to ask, since it cannot tell whether such a session is
// alive without its runtime. A record that cannot be read names none: it
// belongs to no live session, is deleted by name, and whatever sandbox it
// had still carries realm's labels, so the next sweep of that runtime
// removes it.
func (m *Manager) NamedRuntimes() (map[string]bool, error) {
	recs, err := m.Store.All()
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, r := range recs {
		named[r.Runtime] = true
	}
	return named, nil
}

// List returns the records that parse, sorted by id.
func (m *Manager) List() ([]*Record, error) { return m.Store.All() }

// Live returns the sessions that are alive, and the mounts they use: the
// record is active, its mount answers, and its sandbox runs (as far as the
// runtime can tell). Everything else in the state dir is the reaper's.
func (m *Manager) Live(ctx context.Context) (sessions, mounts map[string]bool, err error) {
	sessions, mounts = map[string]bool{}, map[string]bool{}
	recs, err := m.Store.All()
	if err != nil {
		return nil, nil, err
	}
	for _, r := range recs {
		if r.State != StateActive || r.ContainerID == nil || !Alive(r.Mount) {
			continue
		}
		rt, err := m.Runtime(ctx, r.Runtime)
		if err != nil {
			return nil, nil, err
		}
		if p, ok := rt.(Prober); ok {
			running, err := p.Running(ctx, *r.ContainerID)
			if err != nil {
				return nil, nil, err
			}
			if !running {
				continue
			}
		}
		sessions[r.ID] = true
		mounts[r.Mount] = true
	}
	return sessions, mounts, nil
}
