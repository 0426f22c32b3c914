package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
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
}

func (f *fakeRuntime) Name() string { return "fake" }
func (f *fakeRuntime) Create(ctx context.Context, s Spec) (string, error) {
	f.calls = append(f.calls, "create")
	return "cid", nil
}
func (f *fakeRuntime) Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error) {
	f.calls = append(f.calls, "exec "+id)
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
	tests := []struct {
		name     string
		rec      *Record
		ref      string
		wantCode errcode.Code
	}{
		{"active by id", &Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid}, "0123456789ab", ""},
		{"active by name", &Record{ID: "0123456789ab", Name: "agent", State: StateActive, ContainerID: &cid}, "agent", ""},
		{"no such session", nil, "0123456789ab", errcode.RealmNotActive},
		{"no such name", nil, "agent", errcode.RealmNotActive},
		{"stopping", &Record{ID: "0123456789ab", State: StateStopping, ContainerID: &cid}, "0123456789ab", errcode.RealmNotActive},
		{"creating without container", &Record{ID: "0123456789ab", State: StateCreating}, "0123456789ab", errcode.RealmNotActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestManager(t)
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
		})
	}
}
