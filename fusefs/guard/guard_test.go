package guard

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
	"github.com/realm-dev/realm/policy"
)

// tree makes files (name: content) and directories (name ending in "/")
// in a new directory, and returns its path and an fd of it.
func tree(t *testing.T, names ...string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if n[len(n)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

// identity is name's stat and ID in the directory held by dir.
func identity(t *testing.T, dir int, name string) (ID, *unix.Stat_t) {
	t.Helper()
	var st unix.Stat_t
	gen, err := dirfd.Statx(dir, name, &st)
	if err != nil {
		t.Fatal(err)
	}
	return ID{Key: locks.KeyOf(&st), Gen: gen}, &st
}

// openDir opens the directory rel beneath root, for the test's own looks.
func openDir(t *testing.T, root, rel string) int {
	t.Helper()
	fd, err := unix.Open(filepath.Join(root, rel), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func newGuard() *Guard { return &Guard{Policy: policy.Default().Matcher()} }

// TestSelfDenied: an object is a credential by its path or its identity,
// unless made through the mount and unchanged since; one changed behind
// the mount is a credential under every name from then on.
func TestSelfDenied(t *testing.T) {
	_, dir := tree(t, ".env", "innocent", "made.key")
	g := newGuard()
	env, envSt := identity(t, dir, ".env")
	innocent, innocentSt := identity(t, dir, "innocent")
	made, madeSt := identity(t, dir, "made.key")
	g.Made.Add(made, madeSt)
	changed := *madeSt
	changed.Size++
	for _, c := range []struct {
		name string
		rel  string
		id   ID
		st   *unix.Stat_t
		want bool
	}{
		{"a credential path", ".env", env, envSt, true},
		{"an innocent path", "innocent", innocent, innocentSt, false},
		{"made through the mount", "made.key", made, madeSt, false},
		{"made, then changed behind the mount", "made.key", made, &changed, true},
		{"that file under another name", "other", made, nil, true},
		{"the credential's identity under an innocent name", "innocent", env, envSt, false}, // not recorded yet
	} {
		if got := g.SelfDenied(c.rel, c.id, c.st); got != c.want {
			t.Errorf("%s: SelfDenied(%q) = %v, want %v", c.name, c.rel, got, c.want)
		}
	}
	g.Creds.Add(env)
	if !g.SelfDenied("innocent", env, envSt) {
		t.Error("a recorded credential under an innocent name: not denied")
	}
	if (&Guard{}).SelfDenied(".env", env, envSt) {
		t.Error("no policy: denied")
	}
}

// TestNameDenied: a credential name is refused unless the op makes it
// where nothing is (not on a hiding mount) or what is there is a made
// file.
func TestNameDenied(t *testing.T) {
	_, dir := tree(t, ".env", "made/.env", "readme")
	madeDir, err := dirfd.OpenDir(dir, "made")
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(madeDir)
	g := newGuard()
	id, st := identity(t, madeDir, ".env")
	g.Made.Add(id, st)
	for _, c := range []struct {
		name     string
		dir      int
		rel, ent string
		makes    bool
		want     bool
	}{
		{"a host's credential", dir, ".env", ".env", true, true},
		{"made where nothing is", dir, "new/.env", "none.env", true, false},
		{"moved where nothing is", dir, "new/.env", "none.env", false, true},
		{"a made file", madeDir, "made/.env", ".env", false, false},
		{"an innocent name", dir, "readme", "readme", false, false},
	} {
		if got := g.NameDenied(c.rel, c.dir, c.ent, c.makes); got != c.want {
			t.Errorf("%s: NameDenied(%q) = %v, want %v", c.name, c.rel, got, c.want)
		}
	}
}

// TestNoteLookupAndScan: lookup and the scan record credentials' and
// protected files' identities; a made file is neither recorded nor hidden.
func TestNoteLookupAndScan(t *testing.T) {
	_, dir := tree(t, ".env", ".envrc", "made.key", "readme")
	g := newGuard()
	made, madeSt := identity(t, dir, "made.key")
	g.Made.Add(made, madeSt)
	for _, name := range []string{".env", ".envrc", "made.key", "readme"} {
		id, st := identity(t, dir, name)
		if hide := g.NoteLookup(name, st, id.Gen); hide {
			t.Errorf("%s: hidden on a mount that does not hide", name)
		}
	}
	env, _ := identity(t, dir, ".env")
	envrc, _ := identity(t, dir, ".envrc")
	if !g.Creds.Knows(env) || g.Creds.Knows(made) || !g.ProtIDs.Knows(envrc) {
		t.Errorf("after lookups: .env %v, made.key %v (credentials); .envrc %v (protected); want true, false, true",
			g.Creds.Knows(env), g.Creds.Knows(made), g.ProtIDs.Knows(envrc))
	}
	s := newGuard()
	creds := 0
	for _, name := range []string{".env", ".envrc", "readme"} {
		if s.scanEntry(dir, name, name) {
			creds++
		}
	}
	if creds != 1 || !s.Creds.Knows(env) || !s.ProtIDs.Knows(envrc) {
		t.Errorf("the scan: %d credentials, .env %v, .envrc %v; want 1, true, true", creds, s.Creds.Knows(env), s.ProtIDs.Knows(envrc))
	}
}

// TestSelfProtected: a change to a protected path, or to a protected file
// under another name, is refused; a protected directory the mount made
// is not.
func TestSelfProtected(t *testing.T) {
	root, dir := tree(t, ".envrc", "envrc.bak", ".git/hooks/", "plain")
	g := newGuard()
	envrc, _ := identity(t, dir, ".envrc")
	hooks, hooksSt := identity(t, openDir(t, root, ".git"), "hooks")
	plain, _ := identity(t, dir, "plain")
	g.ProtIDs.Add(envrc)
	for _, c := range []struct {
		name  string
		rel   string
		id    ID
		isDir bool
		want  ProtectRule
	}{
		{"a protected path", ".envrc", envrc, false, ProtectedPath},
		{"a protected file under another name", "envrc.bak", envrc, false, ProtectedIdentity},
		{"a protected directory of the host's", ".git/hooks", hooks, true, ProtectedPath},
		{"an innocent file", "plain", plain, false, NotProtected},
	} {
		if got := g.SelfProtected(c.rel, c.id, c.isDir); got != c.want {
			t.Errorf("%s: SelfProtected(%q) = %v, want %v", c.name, c.rel, got, c.want)
		}
		if got := g.CommitProtected(c.rel, c.id); !c.isDir && got != c.want {
			t.Errorf("%s: CommitProtected(%q) = %v, want %v", c.name, c.rel, got, c.want)
		}
	}
	g.MadeNew(".git/hooks", hooksSt, hooks.Gen)
	if got := g.SelfProtected(".git/hooks", hooks, true); got != NotProtected {
		t.Errorf("a protected directory the mount made: %v, want NotProtected", got)
	}
}

// TestScanDirRename: a directory moves only if nothing in it is a
// credential (but made files) and nothing would be protected after.
func TestScanDirRename(t *testing.T) {
	root, _ := tree(t, "keys/.env", "keys/ok", "m/docker/config.json", "skip/.env", "clean/a/b")
	g := newGuard()
	open := func(name string) int { return openDir(t, root, name) }
	skip := func(name string) bool { return name == ".env" }
	none := func(string) bool { return false }
	for _, c := range []struct {
		name, from, to string
		skip           func(string) bool
		want           RenameFinding
	}{
		{"holds a credential", "keys", "x", none, RenameFinding{Path: "keys/.env"}},
		{"would plant a protected path", "m/docker", "m/.docker", none, RenameFinding{Path: "m/.docker/config.json", Protected: true}},
		{"a skipped name", "skip", "y", skip, RenameFinding{}},
		{"nothing against it", "clean", "z", none, RenameFinding{}},
	} {
		if got := g.scanDirRename(open(c.from), c.from, c.to, c.skip); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	keys := open("keys")
	id, st := identity(t, keys, ".env")
	g.Made.Add(id, st)
	if got := g.scanDirRename(keys, "keys", "x", none); got != (RenameFinding{}) {
		t.Errorf("a made credential: %+v, want nothing found", got)
	}
}

// TestOwnChange: the mount's own change of a made file restamps it; a
// change behind the mount before it makes the file host-placed.
func TestOwnChange(t *testing.T) {
	path, dir := tree(t, "a.key", "b.key")
	g := newGuard()
	for _, name := range []string{"a.key", "b.key"} {
		id, st := identity(t, dir, name)
		g.Made.Add(id, st)
	}
	if err := os.WriteFile(filepath.Join(path, "b.key"), []byte("host\n"), 0o600); err != nil {
		t.Fatal(err) // behind the mount
	}
	fds := []int{g.MadeFd(dir, "a.key"), g.MadeFd(dir, "b.key"), -1}
	for _, fd := range fds[:2] {
		if fd < 0 {
			t.Fatal("MadeFd of a made file: -1")
		}
		defer dirfd.Close(fd)
	}
	if err := g.OwnChange(fds, func() error {
		for _, name := range []string{"a.key", "b.key"} {
			if err := os.Chmod(filepath.Join(path, name), 0o640); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a, aSt := identity(t, dir, "a.key")
	b, bSt := identity(t, dir, "b.key")
	if got := g.Made.Check(a, aSt); got != MadeFresh {
		t.Errorf("a.key after the mount's chmod: %v, want made", got)
	}
	if got := g.Made.Check(b, bSt); got != NotMade || !g.Creds.Knows(b) {
		t.Errorf("b.key, changed behind the mount first: %v, credential %v; want not made, a credential", got, g.Creds.Knows(b))
	}
	if fd := g.MadeFd(dir, "b.key"); fd != -1 {
		dirfd.Close(fd)
		t.Error("MadeFd of a file no longer made: an fd")
	}
}

// TestScan: the scan records credentials and protected files by identity,
// hands hidden names to sweep and counts what it removed, and ends the
// identity checks' wait.
func TestScan(t *testing.T) {
	root, _ := tree(t, ".env", "d/.envrc", "d/.tmp-a", "d/.tmp-b", "readme")
	fd := openDir(t, root, "")
	g := newGuard()
	g.StartScan()
	hidden := func(name string) bool { return len(name) > 5 && name[:5] == ".tmp-" }
	var swept []string
	res := g.Scan(fd, hidden, func(dir int, name string) bool {
		swept = append(swept, name)
		return name == ".tmp-a"
	})
	if res.Err != nil || res.Entries != 6 || res.Credentials != 1 || res.TempRemoved != 1 || len(swept) != 2 {
		t.Errorf("scan: %+v, swept %v; want 6 entries, 1 credential, 1 temp removed of 2", res, swept)
	}
	select {
	case <-g.Scanned():
	default:
		t.Error("the scan is done, its channel open")
	}
	env, _ := identity(t, fd, ".env")
	envrc, _ := identity(t, openDir(t, root, "d"), ".envrc")
	if !g.Creds.Has(env) || !g.ProtIDs.Has(envrc) {
		t.Errorf("after the scan: .env %v, d/.envrc %v; want both recorded", g.Creds.Has(env), g.ProtIDs.Has(envrc))
	}
}

// TestJudgeSelf: an operation on an object is refused as a credential
// first, then, only when it changes the object, by the protect rule.
func TestJudgeSelf(t *testing.T) {
	_, dir := tree(t, ".env", ".envrc", "envrc.bak", "plain")
	g := newGuard()
	env, envSt := identity(t, dir, ".env")
	envrc, envrcSt := identity(t, dir, ".envrc")
	plain, plainSt := identity(t, dir, "plain")
	g.ProtIDs.Add(envrc)
	g.Creds.Add(env)
	for _, c := range []struct {
		name       string
		rel        string
		id         ID
		st         *unix.Stat_t
		changes    bool
		credential bool
		rule       ProtectRule
	}{
		{"a credential read", ".env", env, envSt, false, true, NotProtected},
		{"a credential changed", ".env", env, nil, true, true, NotProtected},
		{"a credential at a protected path", ".envrc", env, nil, true, true, NotProtected}, // the credential comes first
		{"a protected file read", ".envrc", envrc, envrcSt, false, false, NotProtected},
		{"a protected file changed", ".envrc", envrc, envrcSt, true, false, ProtectedPath},
		{"a protected file under another name", "envrc.bak", envrc, nil, true, false, ProtectedIdentity},
		{"an innocent file changed", "plain", plain, plainSt, true, false, NotProtected},
	} {
		credential, rule := g.JudgeSelf(c.rel, c.id, c.st, false, c.changes)
		if credential != c.credential || rule != c.rule {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, credential, rule, c.credential, c.rule)
		}
	}
	if credential, rule := (&Guard{}).JudgeSelf(".envrc", envrc, nil, false, true); credential || rule != NotProtected {
		t.Errorf("no policy: %v, %v; want nothing", credential, rule)
	}
}
