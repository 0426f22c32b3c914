package policy

import (
	"strings"
	"testing"
)

func TestCoordinated(t *testing.T) {
	custom := &Policy{Version: 1, Symlinks: SymlinksInsideOnly, Coordinated: Coordinated{Paths: []string{"data/*.lmdb"}}}
	tests := []struct {
		p    *Policy
		rel  string
		want bool
	}{
		{Default(), "app.db", true},
		{Default(), "var/app.db-wal", true},
		{Default(), "var/app.db-shm", true},
		{Default(), "app.db-journal", true},
		{Default(), "x/cache.sqlite3", true},
		{Default(), "notes.txt", false},
		{Default(), "app.db.bak", false},
		{Default(), "", false},
		{custom, "data/x.lmdb", true},
		{custom, "app.db", false}, // defaults off
		{nil, "app.db", true},     // nil: the default policy
	}
	for _, tt := range tests {
		if got := tt.p.Matcher().Coordinated(tt.rel); got != tt.want {
			t.Errorf("Coordinated(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
	var m *Matcher
	if !m.Coordinated("a.db") {
		t.Error("a nil Matcher does not apply the default set")
	}
}

// TestCoordinatedByName: the built-in set and **/ globs of one segment are
// decided by the last segment; any other glob needs the path.
func TestCoordinatedByName(t *testing.T) {
	for _, tt := range []struct {
		paths    []string
		defaults bool
		want     bool
	}{
		{nil, true, true},
		{[]string{"**/*.lmdb"}, true, true},
		{[]string{"data/*.lmdb"}, true, false},
		{[]string{"**/data/*.lmdb"}, false, false},
		{[]string{"**/**"}, false, false},
	} {
		p := &Policy{Version: 1, Symlinks: SymlinksInsideOnly, Coordinated: Coordinated{Defaults: tt.defaults, Paths: tt.paths}}
		m := p.Matcher()
		if got := m.CoordinatedByName(); got != tt.want {
			t.Errorf("%v (defaults %v): CoordinatedByName = %v, want %v", tt.paths, tt.defaults, got, tt.want)
		}
		if got := m.CoordinatedByName(); got {
			for _, rel := range []string{"a/b/app.db", "x.lmdb", "d/x.db-wal", "notes.txt"} {
				name := rel[strings.LastIndexByte(rel, '/')+1:]
				if m.Coordinated(name) != m.Coordinated(rel) {
					t.Errorf("%v: Coordinated(%q) != Coordinated(%q)", tt.paths, name, rel)
				}
			}
		}
	}
}
