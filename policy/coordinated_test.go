package policy

import "testing"

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
