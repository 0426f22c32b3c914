package guard

import (
	"testing"

	"github.com/realm-dev/realm/policy"
)

// TestAdmitEntry: a read-only mount refuses before anything else; a hidden
// name is absent to an op that needs it and refused to one that makes it.
func TestAdmitEntry(t *testing.T) {
	for _, c := range []struct {
		readOnly, hidden bool
		use              Use
		want             Entry
	}{
		{false, false, Removes, EntryGo},
		{false, false, MovesFrom, EntryGo},
		{false, false, Makes, EntryGo},
		{false, false, MakesDir, EntryGo},
		{true, false, Makes, EntryReadOnly},
		{true, true, Removes, EntryReadOnly}, // read-only comes first
		{false, true, Removes, EntryAbsent},
		{false, true, MovesFrom, EntryAbsent},
		{false, true, Makes, EntryHiddenName},
		{false, true, MakesDir, EntryHiddenName},
	} {
		if got := AdmitEntry(c.readOnly, c.hidden, c.use); got != c.want {
			t.Errorf("read-only %v, hidden %v, %v: %v; want %v", c.readOnly, c.hidden, c.use, got, c.want)
		}
	}
}

// TestRenameTarget: an exchange's new name is moved away, another
// rename's is made.
func TestRenameTarget(t *testing.T) {
	if RenameTarget(false) != Makes || RenameTarget(true) != MovesFrom {
		t.Errorf("RenameTarget: %v, %v; want makes, moves from", RenameTarget(false), RenameTarget(true))
	}
}

// TestJudgeName: a credential is refused where the op moves or makes it,
// unless nothing is there and the op makes it or the mount made it; a
// protected path only where the op makes it; a directory made and a name
// removed are judged by neither.
func TestJudgeName(t *testing.T) {
	_, dir := tree(t, ".env", "made.key", "host.key", ".envrc", "plain")
	g := newGuard()
	made, madeSt := identity(t, dir, "made.key")
	g.Made.Add(made, madeSt)
	hidePolicy := policy.Default()
	hidePolicy.Credentials.Hide = true
	hiding := &Guard{Policy: hidePolicy.Matcher()}
	for _, c := range []struct {
		g    *Guard
		name string
		use  Use
		want NameRule
	}{
		{g, ".env", Removes, NameAllowed},
		{g, ".env", MovesFrom, NameCredential},
		{g, ".env", Makes, NameCredential},
		{g, ".env", MakesDir, NameAllowed},
		{g, "new.key", Makes, NameAllowed},        // nothing there yet
		{g, "new.key", MovesFrom, NameCredential}, // only made is let through
		{hiding, "new.key", Makes, NameCredential},
		{g, "made.key", MovesFrom, NameAllowed},
		{g, "made.key", Makes, NameAllowed},
		{g, "host.key", MovesFrom, NameCredential},
		{g, ".envrc", Makes, NameProtected},
		{g, ".envrc", MovesFrom, NameAllowed},
		{g, ".envrc", MakesDir, NameAllowed},
		{g, ".envrc", Removes, NameAllowed},
		{g, "plain", Makes, NameAllowed},
		{&Guard{}, ".env", Makes, NameAllowed},
		{&Guard{}, ".envrc", Makes, NameAllowed},
	} {
		if got := c.g.JudgeName(c.name, dir, c.name, c.use); got != c.want {
			t.Errorf("%s, %v: %v; want %v", c.name, c.use, got, c.want)
		}
	}
}

// TestJudgeRename: an exchange's names are judged by the protect rule
// first, then the old name as moved away, then the new one as made (or
// moved away, for an exchange); the path refused is said.
func TestJudgeRename(t *testing.T) {
	_, dir := tree(t, ".env", ".envrc", "a", "b")
	g := newGuard()
	for _, c := range []struct {
		name, newName string
		exchange      bool
		want          NameRule
		rel           string
	}{
		{"a", "c", false, NameAllowed, ""},
		{"a", "b", true, NameAllowed, ""},
		{".env", "c", false, NameCredential, ".env"},
		{"a", ".env", false, NameCredential, ".env"},
		{"a", ".envrc", false, NameProtected, ".envrc"},
		{".envrc", "c", false, NameAllowed, ""}, // moving a protected name away plants nothing
		{".envrc", "a", true, NameProtected, ".envrc"},
		{"a", ".envrc", true, NameProtected, ".envrc"},
		{".env", ".envrc", true, NameProtected, ".envrc"}, // the protect rule comes first
		{"a", ".env", true, NameCredential, ".env"},
	} {
		r := RenameNames{OldDir: dir, NewDir: dir, Name: c.name, NewName: c.newName, OldRel: c.name, NewRel: c.newName, Exchange: c.exchange}
		if got, rel := g.JudgeRename(r); got != c.want || rel != c.rel {
			t.Errorf("%s → %s (exchange %v): %v %q; want %v %q", c.name, c.newName, c.exchange, got, rel, c.want, c.rel)
		}
	}
}

// TestRenameScans: a rename starts exclusive when it moves a directory:
// the old name's, or for an exchange either name's.
func TestRenameScans(t *testing.T) {
	_, dir := tree(t, "d/", "e/", "f")
	for _, c := range []struct {
		name, newName string
		exchange      bool
		want          bool
	}{
		{"d", "x", false, true},
		{"f", "x", false, false},
		{"f", "e", false, false},
		{"f", "e", true, true},
		{"gone", "x", false, false},
	} {
		r := RenameNames{OldDir: dir, NewDir: dir, Name: c.name, NewName: c.newName, Exchange: c.exchange}
		if got := RenameScans(r); got != c.want {
			t.Errorf("%s → %s (exchange %v): %v; want %v", c.name, c.newName, c.exchange, got, c.want)
		}
	}
}
