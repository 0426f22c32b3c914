package reaper

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox/label"
)

// here is the state dir id of the reaps in these tests; there another's.
const (
	here  = "0123456789abcdef"
	there = "fedcba9876543210"
)

// callLog records the calls of the fakes, in order, so tests assert the
// reap's order on it rather than on timing.
type callLog []string

func (l *callLog) add(s string) { *l = append(*l, s) }

// fakeContainers is an engine whose Remove may leave a container behind.
type fakeContainers struct {
	log       *callLog
	live      []Container
	stuck     map[string]bool // Remove "succeeds" but the container stays
	failList  bool
	removeErr map[string]error
}

func (f *fakeContainers) List(ctx context.Context) ([]Container, error) {
	f.log.add("containers.list")
	if f.failList {
		return nil, errors.New("service down")
	}
	return append([]Container(nil), f.live...), nil
}

func (f *fakeContainers) Remove(ctx context.Context, id string) error {
	f.log.add("containers.remove " + id)
	if err := f.removeErr[id]; err != nil {
		return err
	}
	if f.stuck[id] {
		return nil
	}
	for i, c := range f.live {
		if c.ID == id {
			f.live = append(f.live[:i], f.live[i+1:]...)
			break
		}
	}
	return nil
}

type fakeStore struct {
	log *callLog
	ids []string
}

func (s *fakeStore) List() ([]string, error) {
	s.log.add("records.list")
	return append([]string(nil), s.ids...), nil
}

func (s *fakeStore) Delete(id string) error {
	s.log.add("records.delete " + id)
	for i, x := range s.ids {
		if x == id {
			s.ids = append(s.ids[:i], s.ids[i+1:]...)
			break
		}
	}
	return nil
}

type fakeMounts struct {
	log  *callLog
	mnts []string
	fail map[string]bool
}

func (m *fakeMounts) List() ([]string, error) {
	m.log.add("mounts.list")
	return append([]string(nil), m.mnts...), nil
}

func (m *fakeMounts) Unmount(mnt string) error {
	m.log.add("mounts.unmount " + mnt)
	if m.fail[mnt] {
		return errors.New("transport endpoint is not connected")
	}
	return nil
}

type fakeSandboxes struct {
	log *callLog
	sbs []label.Sandbox
}

func (s *fakeSandboxes) ListSandboxes(ctx context.Context) ([]label.Sandbox, error) {
	s.log.add("sandboxes.list")
	return s.sbs, nil
}

func (s *fakeSandboxes) DeleteSandbox(ctx context.Context, name string) error {
	s.log.add("sandboxes.delete " + name)
	return nil
}

func TestReapOrder(t *testing.T) {
	var log callLog
	cs := &fakeContainers{log: &log, live: []Container{{ID: "c1", Session: "aaaaaaaaaaaa"}, {ID: "c2", State: here}}}
	st := &fakeStore{log: &log, ids: []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"}}
	ms := &fakeMounts{log: &log, mnts: []string{"/state/mounts/m1"}}
	sb := &fakeSandboxes{log: &log, sbs: []label.Sandbox{{Name: "realm-aaaaaaaaaaaa", State: here}, {Name: "other-x"}}}
	r, err := Reap(context.Background(), Config{Containers: cs, Store: st, Mounts: ms, Sandboxes: []Sandboxes{sb}, State: here})
	if err != nil {
		t.Fatal(err)
	}
	want := callLog{
		"records.list",
		"sandboxes.list", "sandboxes.delete realm-aaaaaaaaaaaa",
		"containers.list", "containers.remove c1", "containers.remove c2", "containers.list",
		"mounts.list", "mounts.unmount /state/mounts/m1",
		"records.delete aaaaaaaaaaaa", "records.delete bbbbbbbbbbbb",
	}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	wantR := Report{SandboxesDeleted: 1, ContainersRemoved: 2, RecordsDeleted: 2, MountsCleaned: 1}
	if !reflect.DeepEqual(r, wantR) {
		t.Errorf("report %+v, want %+v", r, wantR)
	}
}

// TestReapWithoutContainerEngine: with no engine to ask (an OpenShell-only
// host), the sandboxes still go before the records, in the same order.
func TestReapWithoutContainerEngine(t *testing.T) {
	var log callLog
	st := &fakeStore{log: &log, ids: []string{"aaaaaaaaaaaa"}}
	sb := &fakeSandboxes{log: &log, sbs: []label.Sandbox{{Name: "realm-aaaaaaaaaaaa", State: here}}}
	r, err := Reap(context.Background(), Config{Store: st, Sandboxes: []Sandboxes{sb}, State: here})
	if err != nil {
		t.Fatal(err)
	}
	want := callLog{"records.list", "sandboxes.list", "sandboxes.delete realm-aaaaaaaaaaaa", "records.delete aaaaaaaaaaaa"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if wantR := (Report{SandboxesDeleted: 1, RecordsDeleted: 1}); !reflect.DeepEqual(r, wantR) {
		t.Errorf("report %+v, want %+v", r, wantR)
	}
}

func TestReapCases(t *testing.T) {
	tests := []struct {
		name       string
		containers []Container
		stuck      map[string]bool
		removeErr  map[string]error
		failList   bool
		records    []string
		keep       map[string]bool
		wantCode   errcode.Code
		wantR      Report
		wantLeft   []string // records left
		wantNoDel  bool     // no records.delete call at all
	}{
		{
			name:       "null container id and container id records both reaped",
			containers: []Container{{ID: "c1", Session: "bbbbbbbbbbbb"}},
			records:    []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"},
			wantR:      Report{ContainersRemoved: 1, RecordsDeleted: 2},
		},
		{
			name:       "survivor is REALM_STOPPING and every record is kept",
			containers: []Container{{ID: "c1", State: here}, {ID: "c2", State: here}},
			stuck:      map[string]bool{"c2": true},
			records:    []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"},
			wantCode:   errcode.RealmStopping,
			wantR:      Report{ContainersRemoved: 2},
			wantLeft:   []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"},
			wantNoDel:  true,
		},
		{
			name:       "remove error with survivor keeps records",
			containers: []Container{{ID: "c1", State: here}},
			removeErr:  map[string]error{"c1": errors.New("device busy")},
			records:    []string{"aaaaaaaaaaaa"},
			wantCode:   errcode.RealmStopping,
			wantLeft:   []string{"aaaaaaaaaaaa"},
			wantNoDel:  true,
		},
		{
			name:      "list failure deletes nothing",
			failList:  true,
			records:   []string{"aaaaaaaaaaaa"},
			wantCode:  errcode.RealmStopping,
			wantLeft:  []string{"aaaaaaaaaaaa"},
			wantNoDel: true,
		},
		{
			name:       "live session kept",
			containers: []Container{{ID: "c1", Session: "aaaaaaaaaaaa"}, {ID: "c2", Session: "bbbbbbbbbbbb"}},
			records:    []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"},
			keep:       map[string]bool{"aaaaaaaaaaaa": true},
			wantR:      Report{ContainersRemoved: 1, RecordsDeleted: 1},
			wantLeft:   []string{"aaaaaaaaaaaa"},
		},
		{
			name:    "nothing to do",
			records: nil,
			wantR:   Report{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log callLog
			cs := &fakeContainers{log: &log, live: tt.containers, stuck: tt.stuck, removeErr: tt.removeErr, failList: tt.failList}
			st := &fakeStore{log: &log, ids: tt.records}
			r, err := Reap(context.Background(), Config{Containers: cs, Store: st, Keep: tt.keep, State: here})
			if c, _ := errcode.Of(err); c != tt.wantCode {
				t.Fatalf("code %q, want %q (err %v)", c, tt.wantCode, err)
			}
			if !reflect.DeepEqual(r, tt.wantR) {
				t.Errorf("report %+v, want %+v", r, tt.wantR)
			}
			if !reflect.DeepEqual(st.ids, tt.wantLeft) && (len(st.ids) != 0 || len(tt.wantLeft) != 0) {
				t.Errorf("records left %v, want %v", st.ids, tt.wantLeft)
			}
			for _, c := range log {
				if tt.wantNoDel && strings.HasPrefix(c, "records.delete") {
					t.Errorf("records touched after a failed sweep: %v", log)
					break
				}
			}
		})
	}
}

func TestSweepTwiceIsNoOp(t *testing.T) {
	var log callLog
	cs := &fakeContainers{log: &log, live: []Container{{ID: "c1", State: here}, {ID: "c2", State: here}, {ID: "c3", State: here}}}
	sc := &scope{state: here}
	n, err := sweep(context.Background(), cs, sc, &Report{})
	if err != nil || n != 3 {
		t.Fatalf("first sweep = %d, %v; want 3, nil", n, err)
	}
	n, err = sweep(context.Background(), cs, sc, &Report{})
	if err != nil || n != 0 {
		t.Fatalf("second sweep = %d, %v; want 0, nil", n, err)
	}
}

func TestReapMountFailureDoesNotStopIt(t *testing.T) {
	var log callLog
	cs := &fakeContainers{log: &log}
	st := &fakeStore{log: &log, ids: []string{"aaaaaaaaaaaa"}}
	ms := &fakeMounts{log: &log, mnts: []string{"/s/m1", "/s/m2", "/s/m3"}, fail: map[string]bool{"/s/m1": true}}
	r, err := Reap(context.Background(), Config{Containers: cs, Store: st, Mounts: ms, KeepMounts: map[string]bool{"/s/m3": true}})
	if err == nil || !strings.Contains(err.Error(), "/s/m1") {
		t.Errorf("err = %v, want the failed mount named", err)
	}
	if r.MountsCleaned != 1 || r.RecordsDeleted != 1 {
		t.Errorf("report %+v, want 1 mount cleaned and 1 record deleted", r)
	}
	for _, c := range log {
		if c == "mounts.unmount /s/m3" {
			t.Error("a live session's mount was unmounted")
		}
	}
}

func TestRealmOwned(t *testing.T) {
	tests := []struct {
		labels  map[string]string
		session string
		ok      bool
	}{
		{map[string]string{"io.realm.managed": "true", "io.realm.session": "aaaaaaaaaaaa"}, "aaaaaaaaaaaa", true},
		{map[string]string{"io.realm.managed": "false"}, "", false},
		{map[string]string{}, "", false},
		{map[string]string{"openshell.managed": "true", "openshell.ai/sandbox-name": "realm-bbbbbbbbbbbb"}, "bbbbbbbbbbbb", true},
		{map[string]string{"openshell.managed": "true", "openshell.ai/sandbox-name": "other-x"}, "", false},
		{map[string]string{"openshell.managed": "true", "openshell.ai/sandbox-name": "realm-"}, "", false},
		{map[string]string{"openshell.managed": "false", "openshell.ai/sandbox-name": "realm-x"}, "", false},
	}
	for _, tt := range tests {
		s, ok := realmOwned(tt.labels)
		if s != tt.session || ok != tt.ok {
			t.Errorf("realmOwned(%v) = %q, %v; want %q, %v", tt.labels, s, ok, tt.session, tt.ok)
		}
	}
}

// TestReapLeavesOtherStateDirsObjects: a reap removes only its own state
// dir's sandboxes and containers (its state label, or no label and a record
// here); another state dir's are never touched, even with All; unlabelled
// ones that no record names are left and reported, unless All. The order
// holds: sandboxes, containers (listed again), then records.
func TestReapLeavesOtherStateDirsObjects(t *testing.T) {
	containers := func() []Container {
		return []Container{
			{ID: "mine-dead", Session: "aaaaaaaaaaaa", State: here},
			{ID: "mine-live", Session: "bbbbbbbbbbbb", State: here},
			{ID: "theirs", Name: "realm-cccccccccccc", Session: "cccccccccccc", State: there},
			{ID: "old-recorded", Session: "dddddddddddd"},                            // no label, a record here
			{ID: "old-unknown", Name: "realm-eeeeeeeeeeee", Session: "eeeeeeeeeeee"}, // no label, no record
			{ID: "os-theirs", Session: "ffffffffffff"},                               // OpenShell driver: its sandbox's label
			{ID: "os-mine", Session: "999999999999"},
		}
	}
	sandboxes := func() []label.Sandbox {
		return []label.Sandbox{
			{Name: "realm-aaaaaaaaaaaa", State: here},
			{Name: "realm-bbbbbbbbbbbb", State: here},
			{Name: "realm-cccccccccccc", State: there},
			{Name: "realm-ffffffffffff", State: there},
			{Name: "realm-999999999999", State: here},
			{Name: "realm-777777777777"}, // no label, no record
			{Name: "other-x", State: here},
		}
	}
	records := []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb", "dddddddddddd"}
	for _, tt := range []struct {
		name           string
		all            bool
		wantRemoved    []string
		wantDeleted    []string
		wantUnlabelled []string
	}{
		{
			name:           "plain reap",
			wantRemoved:    []string{"mine-dead", "old-recorded", "os-mine"},
			wantDeleted:    []string{"realm-aaaaaaaaaaaa", "realm-999999999999"},
			wantUnlabelled: []string{"sandbox realm-777777777777", "container realm-eeeeeeeeeeee"},
		},
		{
			name:        "all",
			all:         true,
			wantRemoved: []string{"mine-dead", "mine-live", "old-recorded", "old-unknown", "os-mine"},
			wantDeleted: []string{"realm-aaaaaaaaaaaa", "realm-bbbbbbbbbbbb", "realm-999999999999", "realm-777777777777"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log callLog
			cs := &fakeContainers{log: &log, live: containers()}
			st := &fakeStore{log: &log, ids: append([]string(nil), records...)}
			sb := &fakeSandboxes{log: &log, sbs: sandboxes()}
			cfg := Config{Containers: cs, Store: st, Sandboxes: []Sandboxes{sb}, State: here, All: tt.all}
			if !tt.all {
				cfg.Keep = map[string]bool{"bbbbbbbbbbbb": true}
			}
			r, err := Reap(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var removed, deleted []string
			lastContainer, firstRecord := -1, len(log)
			for i, c := range log {
				if id, ok := strings.CutPrefix(c, "containers.remove "); ok {
					removed = append(removed, id)
				}
				if n, ok := strings.CutPrefix(c, "sandboxes.delete "); ok {
					deleted = append(deleted, n)
				}
				if strings.HasPrefix(c, "containers.") {
					lastContainer = i
				}
				if strings.HasPrefix(c, "records.delete") && i < firstRecord {
					firstRecord = i
				}
			}
			if !reflect.DeepEqual(removed, tt.wantRemoved) {
				t.Errorf("containers removed %q, want %q", removed, tt.wantRemoved)
			}
			if !reflect.DeepEqual(deleted, tt.wantDeleted) {
				t.Errorf("sandboxes deleted %q, want %q", deleted, tt.wantDeleted)
			}
			if !reflect.DeepEqual(r.Unlabelled, tt.wantUnlabelled) {
				t.Errorf("unlabelled %q, want %q", r.Unlabelled, tt.wantUnlabelled)
			}
			if lastContainer > firstRecord {
				t.Errorf("a record was deleted before the containers were proven gone: %v", log)
			}
			for _, c := range cs.live {
				if c.State == there || c.Session == "ffffffffffff" {
					continue
				}
				if !tt.all && (c.ID == "mine-live" || c.ID == "old-unknown") {
					continue
				}
				t.Errorf("container %s left", c.ID)
			}
			if len(cs.live) < 2 {
				t.Errorf("another state dir's containers were removed: left %v", cs.live)
			}
		})
	}
}
