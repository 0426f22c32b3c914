package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

// fakeRuntime records calls and what the store held at each Destroy, so the
// two-phase order of destroy is asserted on state, not timing.
type fakeRuntime struct {
	store      *Store
	calls      []string
	destroyErr error
	seen       []State // record state at each Destroy; "" if no record
	execErr    error   // what Exec fails with
	state      string  // what State answers ("" : running)
	stateErr   error   // what State fails with
}

func (f *fakeRuntime) State(ctx context.Context, id string) (string, error) {
	if f.stateErr != nil {
		return "", f.stateErr
	}
	if f.state == "" {
		return "running", nil
	}
	return f.state, nil
}

func (f *fakeRuntime) Name() string { return "fake" }
func (f *fakeRuntime) Create(ctx context.Context, s Spec) (string, error) {
	f.calls = append(f.calls, "create")
	return "cid", nil
}
func (f *fakeRuntime) Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error) {
	f.calls = append(f.calls, "exec "+id)
	if f.execErr != nil {
		return ExecResult{}, f.execErr
	}
	return ExecResult{ExitCode: 3}, nil
}
func (f *fakeRuntime) Destroy(ctx context.Context, id string) error {
	f.calls = append(f.calls, "destroy "+id)
	var st State
	if rec, err := f.store.Load("0123456789ab"); err == nil {
		st = rec.State
	}
	f.seen = append(f.seen, st)
	return f.destroyErr
}

func newTestManager(t *testing.T) (*Manager, *fakeRuntime) {
	dir := t.TempDir()
	store := NewStore(dir)
	rt := &fakeRuntime{store: store}
	m := &Manager{
		Store:   store,
		Mounts:  NewMounts(dir, "/nonexistent/realmfs"),
		Runtime: func(ctx context.Context, name string) (Runtime, error) { return rt, nil },
		// Every mount answers but one at a path called "dead".
		MountAlive: func(mnt string) bool { return filepath.Base(mnt) != "dead" },
	}
	return m, rt
}

func TestDestroyTwoPhase(t *testing.T) {
	cid := "cid"
	tests := []struct {
		name       string
		destroyErr error
		wantCalls  []string
		wantSeen   []State
		wantRecord State // "" when the record must be gone
	}{
		{"record goes last", nil, []string{"destroy cid", "destroy realm-0123456789ab"}, []State{StateStopping, StateStopping}, ""},
		{"failure keeps the record", errors.New("engine down"), []string{"destroy cid"}, []State{StateStopping}, StateStopping},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt := newTestManager(t)
			rt.destroyErr = tt.destroyErr
			rec := &Record{ID: "0123456789ab", State: StateActive, Runtime: "fake", ContainerID: &cid,
				Mount: filepath.Join(m.Mounts.Dir, "x")}
			if err := m.Store.Save(rec); err != nil {
				t.Fatal(err)
			}
			_, err := m.Destroy(context.Background(), "0123456789ab")
			if (err != nil) != (tt.destroyErr != nil) {
				t.Fatalf("Destroy: %v", err)
			}
			if !reflect.DeepEqual(rt.calls, tt.wantCalls) || !reflect.DeepEqual(rt.seen, tt.wantSeen) {
				t.Errorf("calls %v seeing %v; want %v seeing %v", rt.calls, rt.seen, tt.wantCalls, tt.wantSeen)
			}
			got, err := m.Store.Load("0123456789ab")
			switch {
			case tt.wantRecord == "" && err == nil:
				t.Errorf("record still there: %+v", got)
			case tt.wantRecord != "" && (err != nil || got.State != tt.wantRecord):
				t.Errorf("record = %+v, %v; want state %s", got, err, tt.wantRecord)
			}
		})
	}
}

func TestExecStates(t *testing.T) {
	cid := "cid"
	notRunning := errcode.New(errcode.RealmNotActive, "the container cid is not running")
	tests := []struct {
		name     string
		rec      *Record
		ref      string
		rt       fakeRuntime
		wantCode errcode.Code
		wantMsg  string // in the error's message
	}{
		{"active by id", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid}, "0123456789ab", fakeRuntime{}, "", ""},
		{"active by name", &Record{ID: "0123456789ab", Name: "agent", State: StateActive, ContainerID: &cid}, "agent", fakeRuntime{}, "", ""},
		{"no such session", nil, "0123456789ab", fakeRuntime{}, errcode.RealmNotActive, "no session"},
		{"no such name", nil, "agent", fakeRuntime{}, errcode.RealmNotActive, "no session"},
		{"stopping", &Record{ID: "0123456789ab", State: StateStopping, ContainerID: &cid}, "0123456789ab", fakeRuntime{}, errcode.RealmNotActive, "is stopping"},
		{"creating without container", &Record{ID: "0123456789ab", State: StateCreating}, "0123456789ab", fakeRuntime{}, errcode.RealmNotActive, "is creating"},
		{"mount gone", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid, Mount: "/state/mounts/dead"}, "0123456789ab", fakeRuntime{},
			errcode.RealmNotActive, "mount /state/mounts/dead does not answer; run `realmctl reap` to clean up dead sessions, or `realmctl session destroy 0123456789ab`"},
		{"container exited", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid}, "0123456789ab", fakeRuntime{execErr: notRunning, state: "exited"},
			errcode.RealmNotActive, "its sandbox cid is exited; run `realmctl reap`"},
		{"container gone", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid}, "0123456789ab", fakeRuntime{execErr: notRunning, state: "gone"},
			errcode.RealmNotActive, "is gone; run `realmctl reap`"},
		{"service down is not a dead session", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid}, "0123456789ab",
			fakeRuntime{execErr: notRunning, stateErr: errors.New("no service")}, errcode.RealmNotActive, "the container cid is not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt := newTestManager(t)
			rt.execErr, rt.state, rt.stateErr = tt.rt.execErr, tt.rt.state, tt.rt.stateErr
			if tt.rec != nil {
				tt.rec.Runtime = "fake"
				m.Store.Save(tt.rec)
			}
			res, err := m.Exec(context.Background(), tt.ref, ExecRequest{Argv: []string{"true"}})
			if c, _ := errcode.Of(err); c != tt.wantCode {
				t.Fatalf("code %q, want %q (%v)", c, tt.wantCode, err)
			}
			if err == nil && res.ExitCode != 3 {
				t.Errorf("exit code %d, want the command's 3 as a result", res.ExitCode)
			}
			if err != nil && !strings.Contains(errMessage(err), tt.wantMsg) {
				t.Errorf("message %q lacks %q", errMessage(err), tt.wantMsg)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	cid := "cid"
	tests := []struct {
		name       string
		rec        Record
		rt         fakeRuntime
		want       Health
		wantReason string
	}{
		{"active", Record{State: StateActive, ContainerID: &cid, Mount: "/m/live"}, fakeRuntime{},
			Health{Status: "active", Sandbox: "running", Mount: "answering"}, ""},
		{"container exited", Record{State: StateActive, ContainerID: &cid, Mount: "/m/live"}, fakeRuntime{state: "exited"},
			Health{Status: "dead", Sandbox: "exited", Mount: "answering"}, "sandbox exited"},
		{"mount gone", Record{State: StateActive, ContainerID: &cid, Mount: "/m/dead"}, fakeRuntime{},
			Health{Status: "dead", Sandbox: "running", Mount: "gone"}, "mount gone"},
		{"both gone", Record{State: StateActive, ContainerID: &cid, Mount: "/m/dead"}, fakeRuntime{state: "gone"},
			Health{Status: "dead", Sandbox: "gone", Mount: "gone"}, "sandbox gone, mount gone"},
		{"runtime cannot tell", Record{State: StateActive, ContainerID: &cid, Mount: "/m/live"}, fakeRuntime{stateErr: errcode.New(errcode.RealmNotActive, "no service")},
			Health{Status: "unknown", Sandbox: "unknown", SandboxError: "no service", Mount: "answering"}, ""},
		{"creating", Record{State: StateCreating, Mount: "/m/live"}, fakeRuntime{},
			Health{Status: "creating", Sandbox: "none", Mount: "answering"}, "sandbox none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt := newTestManager(t)
			rt.state, rt.stateErr = tt.rt.state, tt.rt.stateErr
			tt.rec.ID, tt.rec.Runtime = "0123456789ab", "fake"
			h := m.Health(context.Background(), &tt.rec)
			if h != tt.want {
				t.Errorf("Health = %+v, want %+v", h, tt.want)
			}
			if r := h.Reason(); r != tt.wantReason {
				t.Errorf("Reason = %q, want %q", r, tt.wantReason)
			}
		})
	}
}
