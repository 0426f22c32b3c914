package procinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIncarnation: a session's incarnation is its leader's start and the
// boot id's head; a pid's, its process's; none for a cgroup owner, a
// session whose leader is gone (pid N now another session's), or a
// process gone.
func TestIncarnation(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys/kernel/random"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/kernel/random/boot_id"), []byte("196df20c-603c-4ebf-8f98-3cbd4e103e68\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeProc(t, root, 7, statLine(7, "sh", 7, 4242), "0::/a\n")   // leads session 7
	fakeProc(t, root, 9, statLine(9, "sh", 7, 5000), "0::/a\n")   // a member of it
	fakeProc(t, root, 12, statLine(12, "sh", 3, 6000), "0::/a\n") // pid 12: session 3's
	r := NewResolver(OwnerSession, root)
	defer r.Close()
	for _, tc := range []struct {
		owner Owner
		want  Incarnation
	}{
		{"session:7", "4242-196df20c"},
		{"pid:9", "5000-196df20c"},
		{"session:12", ""}, // its leader gone, the pid another's
		{"session:13", ""}, // nothing there
		{"pid:13", ""},
		{"cgroup:/a", ""},
		{"kernel", ""},
		{"session:007", ""},
		{"session:", ""},
	} {
		if got := r.Incarnation(tc.owner); got != tc.want {
			t.Errorf("Incarnation(%q) = %q, want %q", tc.owner, got, tc.want)
		}
	}
	// The start is the process's: a leader started again (its pid reused
	// by a new session) is another incarnation.
	fakeProc(t, root, 7, statLine(7, "bash", 7, 9999), "0::/b\n")
	if got := r.Incarnation("session:7"); got != "9999-196df20c" {
		t.Errorf("after the pid's reuse: %q", got)
	}
}

// TestIncarnationOfSelf: on /proc, this process's pid owner has an
// incarnation that stays the same, and its boot id's head is 8 hex digits.
func TestIncarnationOfSelf(t *testing.T) {
	o := pidOwner(uint64(os.Getpid()))
	a, b := IncarnationOf(o), IncarnationOf(o)
	if a == "" || a != b {
		t.Fatalf("IncarnationOf(%s) = %q, then %q", o, a, b)
	}
	if boot := procBoot(); len(boot) != 8 {
		t.Errorf("boot id head %q", boot)
	}
	if got := IncarnationOf("cgroup:/x"); got != "" {
		t.Errorf("a cgroup owner's: %q", got)
	}
}
