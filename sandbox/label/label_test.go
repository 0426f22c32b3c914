package label

import "testing"

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
