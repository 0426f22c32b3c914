package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/realm-dev/realm/errcode"
)

func TestStoreSaveLoad(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "sessions")}
	cid := "abc123"
	tests := []struct {
		name string
		rec  Record
	}{
		{"creating without container", Record{ID: "0123456789ab", State: StateCreating, Workload: []string{"/bin/sleep", "1"}}},
		{"active with container", Record{ID: "0123456789ab", State: StateActive, ContainerID: &cid, Egress: []string{"example.com:443"}}},
		{"stopping", Record{ID: "ba9876543210", State: StateStopping, ContainerID: &cid, Name: "agent-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rec.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := s.Save(&tt.rec); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(tt.rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.rec) {
				t.Errorf("Load = %+v, want %+v", *got, tt.rec)
			}
			names, _ := filepath.Glob(filepath.Join(s.Dir, ".*"))
			if len(names) != 0 {
				t.Errorf("temp files left behind: %v", names)
			}
		})
	}
}

func TestRecordContainerIDNullUntilKnown(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if err := s.Save(&Record{ID: "0123456789ab", State: StateCreating}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir, "0123456789ab.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"containerId": null`) {
		t.Errorf("record does not say containerId null:\n%s", data)
	}
}

func TestStoreList(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // name -> content; "" name is skipped
		dirs  []string
		want  []string
	}{
		{"absent dir", nil, nil, nil},
		{"records by name, sorted", map[string]string{"bbbbbbbbbbbb.json": "{}", "aaaaaaaaaaaa.json": "{}"}, nil, []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"}},
		{"corrupt record listed", map[string]string{"cccccccccccc.json": "{not json"}, nil, []string{"cccccccccccc"}},
		{"non-record names ignored", map[string]string{
			"notes.txt": "x", "ABCDEFABCDEF.json": "{}", "abc.json": "{}", ".aaaaaaaaaaaa.json.tmp-1": "{}",
			"dddddddddddd.json": "{}",
		}, []string{"eeeeeeeeeeee.json"}, []string{"dddddddddddd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sessions")
			if tt.files != nil || tt.dirs != nil {
				os.MkdirAll(dir, 0o700)
			}
			for n, c := range tt.files {
				os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600)
			}
			for _, d := range tt.dirs {
				os.Mkdir(filepath.Join(dir, d), 0o700)
			}
			got, err := (&Store{Dir: dir}).List()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("List = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStoreLoadAndDelete(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	os.WriteFile(filepath.Join(s.Dir, "cccccccccccc.json"), []byte("{not json"), 0o600)
	tests := []struct {
		name     string
		id       string
		wantCode errcode.Code
		noSess   bool
	}{
		{"missing", "aaaaaaaaaaaa", errcode.RealmNotActive, true},
		{"bad id", "../etc/passwd", errcode.RealmNotActive, true},
		{"corrupt", "cccccccccccc", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Load(tt.id)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if c, _ := errcode.Of(err); c != tt.wantCode {
				t.Errorf("code %q, want %q (%v)", c, tt.wantCode, err)
			}
			if errors.Is(err, ErrNoSession) != tt.noSess {
				t.Errorf("errors.Is(ErrNoSession) = %v", !tt.noSess)
			}
		})
	}
	if err := s.Delete("cccccccccccc"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("cccccccccccc"); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if ids, _ := s.List(); len(ids) != 0 {
		t.Errorf("after delete List = %v", ids)
	}
}
