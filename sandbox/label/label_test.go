package label

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNameRoundTrip(t *testing.T) {
	if got := Name("aaaaaaaaaaaa"); got != "realm-aaaaaaaaaaaa" {
		t.Errorf("Name = %q", got)
	}
	for _, tt := range []struct {
		name, id string
		ok       bool
	}{
		{"realm-aaaaaaaaaaaa", "aaaaaaaaaaaa", true},
		{"realm-", "", true},
		{"other-x", "other-x", false},
		{"xrealm-a", "xrealm-a", false},
	} {
		if id, ok := SessionOf(tt.name); id != tt.id || ok != tt.ok {
			t.Errorf("SessionOf(%q) = %q, %v; want %q, %v", tt.name, id, ok, tt.id, tt.ok)
		}
	}
}

func TestStateID(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	id, err := StateID(real)
	if err != nil || !ValidStateID(id) {
		t.Fatalf("StateID(%s) = %q, %v", real, id, err)
	}
	t.Chdir(dir)
	for _, spelling := range []string{link, "real", "./link/", filepath.Join(real, "x", "..")} {
		if got, err := StateID(spelling); got != id || err != nil {
			t.Errorf("StateID(%q) = %q, %v; want %q (same dir)", spelling, got, err, id)
		}
	}
	// Not made yet: the same id before and after it is made.
	later := filepath.Join(link, "later", "state")
	before, err := StateID(later)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(later, 0o700); err != nil {
		t.Fatal(err)
	}
	if after, _ := StateID(later); after != before || before == id {
		t.Errorf("StateID of a dir before it exists %q, after %q (the parent's %q)", before, after, id)
	}
	for _, s := range []string{"", "0123456789abcdeF", "0123456789abcde", "0123456789abcdef0", "-123456789abcdef"} {
		if ValidStateID(s) {
			t.Errorf("ValidStateID(%q) = true", s)
		}
	}
}
