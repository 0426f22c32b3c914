package e2e

// Issue 3 end to end: the credential set on every operation of a real mount,
// the policy file (allow, deny, hide, errors), and the audit log.

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/policy"
)

// credCase is one representative credential file of one built-in glob.
type credCase struct {
	glob  string
	rel   string // the credential, workspace-relative
	base  string // directory for innocent names (outside any denied dir)
	to    string // another name of the same class, for rename/link "to"
	later bool   // created in BACKING after the mount started
}

// repOf turns a built-in glob "**/REST" into a path beneath prefix that it
// matches: "/**" ends as "/secret", "*" becomes star, "?" becomes "q".
func repOf(glob, prefix, star string) string {
	rest := strings.TrimPrefix(glob, "**/")
	if r, ok := strings.CutSuffix(rest, "/**"); ok {
		rest = r + "/secret"
	}
	rest = strings.ReplaceAll(rest, "*", star)
	rest = strings.ReplaceAll(rest, "?", "q")
	return path.Join(prefix, rest)
}

// credCases is one pre-existing and one later file per built-in glob.
func credCases(t *testing.T) []credCase {
	t.Helper()
	deny := policy.Default().Matcher()
	var out []credCase
	for i, g := range policy.DefaultCredentialGlobs {
		if !strings.HasPrefix(g.Pattern, "**/") {
			t.Fatalf("built-in glob %q does not start with **/: extend repOf", g.Pattern)
		}
		for _, later := range []bool{false, true} {
			base := fmt.Sprintf("c%02d", i)
			if later {
				base += "/later"
			}
			c := credCase{glob: g.Pattern, rel: repOf(g.Pattern, base, "x"), base: base,
				to: repOf(g.Pattern, base+"/to", "y"), later: later}
			for _, p := range []string{c.rel, c.to} {
				if !deny.Denied(p) {
					t.Fatalf("representative %q of %q is not denied by the default policy", p, g.Pattern)
				}
			}
			for _, n := range innocentNames(c) {
				if deny.Denied(n) {
					t.Fatalf("innocent name %q is denied", n)
				}
			}
			out = append(out, c)
		}
	}
	return out
}

func innocentNames(c credCase) []string {
	return []string{c.base + "/innocent-cp.txt", c.base + "/innocent-mv.txt", c.base + "/innocent-ln.txt",
		c.base + "/innocent-sym", c.base + "/outside-sym", c.base + "/src.txt"}
}

// symTarget is the relative symlink target from c.base to c.rel.
func symTarget(c credCase) string {
	r, _ := filepath.Rel(c.base, c.rel)
	return r
}

func makeCredFile(t *testing.T, backing string, c credCase) {
	t.Helper()
	writeFile(t, filepath.Join(backing, c.rel), "secret of "+c.glob+"\n")
	if err := os.MkdirAll(filepath.Dir(filepath.Join(backing, c.to)), 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink made outside the mount: reading through it is refused at open.
	if err := os.Symlink(symTarget(c), filepath.Join(backing, c.base, "outside-sym")); err != nil {
		t.Fatal(err)
	}
	// Make the mtime distinct from "now" so an in-place rewrite shows.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(backing, c.rel), old, old); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialDefaultClasses: for every built-in glob, a credential made
// before the mount and one made in BACKING after it are refused (EACCES) to
// cat, cp, python3 open(), mv, ln, ln -s, sed -i, > and >> redirects,
// truncate, and to the same operations as system calls; each stays
// byte-identical (content, inode, mtime in BACKING); stat still works.
func TestCredentialDefaultClasses(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3", "sed", "truncate", "cp", "mv", "ln", "cat")
	cases := credCases(t)
	m := mount(t, Prepare(func(m *Mount) {
		for _, c := range cases {
			if !c.later {
				makeCredFile(t, m.Backing, c)
			}
		}
	}))
	for _, c := range cases {
		if c.later {
			if err := os.MkdirAll(m.BackingPath(c.base), 0o755); err != nil {
				t.Fatal(err)
			}
			makeCredFile(t, m.Backing, c)
		}
		writeFile(t, m.BackingPath(c.base, "src.txt"), "innocent\n")
	}
	before := map[string]fileState{}
	for _, c := range cases {
		before[c.rel] = stateOf(t, m.BackingPath(c.rel))
	}

	// 1. Programs, in one sh run: each command's exit status and stderr.
	type cmdCase struct {
		c    credCase
		name string
		sh   string
	}
	q := func(s string) string { return "'" + s + "'" }
	var cmds []cmdCase
	for _, c := range cases {
		p := q(c.rel)
		cmds = append(cmds,
			cmdCase{c, "cat", "cat -- " + p},
			cmdCase{c, "cp", "cp -- " + p + " " + q(c.base+"/innocent-cp.txt")},
			cmdCase{c, "mv", "mv -- " + p + " " + q(c.base+"/innocent-mv.txt")},
			cmdCase{c, "cat after mv", "cat -- " + q(c.base+"/innocent-mv.txt")},
			cmdCase{c, "ln", "ln -- " + p + " " + q(c.base+"/innocent-ln.txt")},
			cmdCase{c, "ln -s", "ln -s -- " + q(symTarget(c)) + " " + q(c.base+"/innocent-sym")},
			cmdCase{c, "cat through ln -s", "cat -- " + q(c.base+"/innocent-sym")},
			cmdCase{c, "cat through outside symlink", "cat -- " + q(c.base+"/outside-sym")},
			cmdCase{c, "sed -i", "sed -i s/secret/leaked/ -- " + p},
			cmdCase{c, "> redirect", "echo clobbered > " + p},
			cmdCase{c, ">> redirect", "echo appended >> " + p},
			cmdCase{c, "truncate -s0", "truncate -s0 -- " + p},
			cmdCase{c, "mv innocent over it", "mv -f -- " + q(c.base+"/src.txt") + " " + p},
		)
	}
	errDir := t.TempDir()
	var script strings.Builder
	for i, cc := range cmds {
		fmt.Fprintf(&script, "( %s ) >/dev/null 2>%s/%d.err </dev/null; echo \"%d $?\"\n", cc.sh, errDir, i, i)
	}
	scriptFile := filepath.Join(errDir, "script.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runErr(t, m.Dir, nil, "sh", scriptFile)
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	rcs := map[int]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var i, rc int
		if _, err := fmt.Sscanf(line, "%d %d", &i, &rc); err != nil {
			t.Fatalf("sh output line %q: %v", line, err)
		}
		rcs[i] = rc
	}
	for i, cc := range cmds {
		rc, ok := rcs[i]
		stderr, _ := os.ReadFile(fmt.Sprintf("%s/%d.err", errDir, i))
		msg := strings.TrimSpace(string(stderr))
		switch {
		case !ok:
			t.Errorf("%s (%s): no result", cc.c.rel, cc.name)
		case rc == 0:
			t.Errorf("%s (created later: %v): %s succeeded; want a refusal (%s)", cc.c.rel, cc.c.later, cc.name, cc.sh)
		case cc.name == "cat after mv":
			if !strings.Contains(msg, "No such file") {
				t.Errorf("%s: %s: %q, want No such file (mv must not have happened)", cc.c.rel, cc.name, msg)
			}
		case cc.name == "cat through ln -s":
			// The link was refused; if it had been made, reading through it
			// must be EACCES anyway.
			if !strings.Contains(msg, "No such file") && !strings.Contains(msg, "Permission denied") {
				t.Errorf("%s: %s: %q", cc.c.rel, cc.name, msg)
			}
		case !strings.Contains(msg, "Permission denied"):
			t.Errorf("%s (created later: %v): %s: exit %d, stderr %q; want Permission denied (EACCES)", cc.c.rel, cc.c.later, cc.name, rc, msg)
		}
	}

	// 2. python3 open().read(), all files in one interpreter.
	var pyPaths []string
	for _, c := range cases {
		pyPaths = append(pyPaths, c.rel)
	}
	py := `import sys, errno
for p in sys.argv[1:]:
    try:
        open(p).read()
        print(p, "read")
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, e.errno))
`
	out = run(t, m.Dir, nil, "python3", append([]string{"-c", py}, pyPaths...)...)
	pyRes := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		p, r, _ := strings.Cut(line, " ")
		pyRes[p] = r
	}
	for _, c := range cases {
		if pyRes[c.rel] != "EACCES" {
			t.Errorf("python3 open(%q).read(): %q, want EACCES", c.rel, pyRes[c.rel])
		}
	}

	// 3. The same operations as system calls, with exact errnos.
	for _, c := range cases {
		p := m.Path(c.rel)
		for _, op := range []struct {
			name string
			do   func() error
		}{
			{"open O_RDONLY", func() error { return closeFd(unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)) }},
			{"open O_WRONLY", func() error { return closeFd(unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)) }},
			{"open O_RDWR|O_TRUNC", func() error { return closeFd(unix.Open(p, unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0)) }},
			{"open O_WRONLY|O_APPEND", func() error { return closeFd(unix.Open(p, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)) }},
			{"truncate", func() error { return unix.Truncate(p, 0) }},
			{"rename from", func() error { return unix.Rename(p, m.Path(c.base, "innocent-mv.txt")) }},
			{"rename to", func() error { return unix.Rename(m.Path(c.base, "src.txt"), p) }},
			{"link from", func() error { return unix.Link(p, m.Path(c.base, "innocent-ln.txt")) }},
			{"symlink to it", func() error { return unix.Symlink(symTarget(c), m.Path(c.base, "innocent-sym")) }},
			{"setxattr user.x", func() error { return unix.Setxattr(p, "user.x", []byte("1"), 0) }},
		} {
			wantErrno(t, op.do(), unix.EACCES, fmt.Sprintf("%s (created later: %v): %s", c.rel, c.later, op.name))
		}
		// Another credential name that does not exist yet is made through
		// the mount by every route, and reads back: it holds only what the
		// caller had (a checkout's test key, a generated .env).
		to := m.Path(c.to)
		protect := policy.Default().Matcher()
		for _, op := range []struct {
			name string
			do   func() error
			undo func() error
		}{
			{"rename to another credential name", func() error { return unix.Rename(m.Path(c.base, "src.txt"), to) },
				func() error { return unix.Rename(to, m.Path(c.base, "src.txt")) }},
			{"link to", func() error { return unix.Link(m.Path(c.base, "src.txt"), to) }, func() error { return unix.Unlink(to) }},
			{"create another credential name", func() error {
				return closeFd(unix.Open(to, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644))
			}, func() error { return unix.Unlink(to) }},
			{"symlink named as a credential", func() error { return unix.Symlink("src.txt", to) }, func() error { return unix.Unlink(to) }},
			{"mkfifo named as a credential", func() error { return unix.Mkfifo(to, 0o644) }, func() error { return unix.Unlink(to) }},
		} {
			what := fmt.Sprintf("%s (created later: %v): %s", c.to, c.later, op.name)
			if protect.Protected(c.to) {
				// Also host configuration (.npmrc, .netrc): planting it
				// is refused, PROTECTED_PATH_DENIED (plant_test.go).
				wantErrno(t, op.do(), unix.EACCES, what)
				continue
			}
			if op.name == "symlink named as a credential" && protect.Denied(path.Join(path.Dir(c.to), "src.txt")) {
				// In a credential directory (.ssh/**) the link's target
				// is a credential path too: a symlink to a credential.
				wantErrno(t, op.do(), unix.EACCES, what)
				continue
			}
			if err := op.do(); err != nil {
				t.Errorf("%s: %v, want it made through the mount", what, err)
				continue
			}
			if op.name == "rename to another credential name" || op.name == "link to" {
				if got, err := os.ReadFile(to); err != nil || string(got) != "innocent\n" {
					t.Errorf("%s: read back %q, %v; want the bytes the caller had", what, got, err)
				}
			}
			if err := op.undo(); err != nil {
				t.Errorf("%s: undo: %v", what, err)
			}
		}
		// stat works without hide: size and mode, not content.
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Errorf("stat %s: %v (stat of a credential must work without hide)", c.rel, err)
		} else if st.Size != before[c.rel].size {
			t.Errorf("stat %s: size %d, want %d", c.rel, st.Size, before[c.rel].size)
		}
	}

	// 4. Nothing changed, nothing was made.
	for _, c := range cases {
		if d := before[c.rel].diff(stateOf(t, m.BackingPath(c.rel))); d != "" {
			t.Errorf("%s changed in BACKING after refused operations: %s", c.rel, d)
		}
		for _, n := range []string{"innocent-cp.txt", "innocent-mv.txt", "innocent-ln.txt", "innocent-sym"} {
			assertAbsent(t, m.BackingPath(c.base, n))
		}
		assertAbsent(t, m.BackingPath(c.to))
		if got := readFile(t, m.BackingPath(c.base, "src.txt")); got != "innocent\n" {
			t.Errorf("%s/src.txt = %q after a refused rename", c.base, got)
		}
	}
	assertNoTemp(t, m.Backing, "after refused operations")

	// 5. Every credential path has refusals in the audit log, all with the
	// right code.
	m.WaitAudit("the last credential", func(e auditEntry) bool { return e.path() == cases[len(cases)-1].rel })
	byPath := map[string]int{}
	protect := policy.Default().Matcher()
	for _, e := range m.Audit() {
		if e.str("code") == "PROTECTED_PATH_DENIED" && protect.Protected(e.path()) {
			continue // a credential name that is host configuration too
		}
		if e.str("code") != "CREDENTIAL_PATH_DENIED" {
			t.Errorf("audit entry with code %q, want only CREDENTIAL_PATH_DENIED: %v", e.str("code"), e)
			continue
		}
		if !e.errnoIs(unix.EACCES) {
			t.Errorf("audit entry with errno %q, want EACCES: %v", e.str("errno"), e)
		}
		byPath[e.path()]++
	}
	for _, c := range cases {
		if byPath[c.rel] == 0 {
			t.Errorf("no audit entry for %s", c.rel)
		}
	}
}

// closeFd turns an open's result into its error, closing a descriptor that
// should not have been opened.
func closeFd(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestCredentialHardLinkOutside: a credential hard-linked under an innocent
// name in BACKING is refused through the mount under that name, whether the
// link was made before the mount (found by the mount-time walk) or after it
// (the credential having been looked up through the mount by its name).
func TestCredentialHardLinkOutside(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("home", ".ssh", "id_rsa"), "PRIVATE KEY\n")
		if err := os.Link(m.BackingPath("home", ".ssh", "id_rsa"), m.BackingPath("notes.txt")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.BackingPath("a.txt"), "two names, no credential\n")
		if err := os.Link(m.BackingPath("a.txt"), m.BackingPath("b.txt")); err != nil {
			t.Fatal(err)
		}
	}))
	before := stateOf(t, m.BackingPath("notes.txt"))

	_, err := os.ReadFile(m.Path("notes.txt"))
	wantErrno(t, err, unix.EACCES, "read notes.txt (hard link of .ssh/id_rsa made before the mount)")
	err = closeFd(unix.Open(m.Path("notes.txt"), unix.O_WRONLY|unix.O_CLOEXEC, 0))
	wantErrno(t, err, unix.EACCES, "open notes.txt for writing")
	if out, err := runErr(t, m.Dir, nil, "cp", "notes.txt", "copy.txt"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("cp notes.txt: %v %q, want Permission denied", err, out)
	}
	assertAbsent(t, m.BackingPath("copy.txt"))
	if got := readFile(t, m.Path("b.txt")); got != "two names, no credential\n" {
		t.Errorf("b.txt (an innocent file with two links) = %q", got)
	}

	// Made after the mount: the credential is looked up through the mount by
	// its name, then linked outside.
	writeFile(t, m.BackingPath("proj", ".env"), "TOKEN=1\n")
	if _, err := os.Stat(m.Path("proj", ".env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(m.BackingPath("proj", ".env"), m.BackingPath("proj", "readme.txt")); err != nil {
		t.Fatal(err)
	}
	_, err = os.ReadFile(m.Path("proj", "readme.txt"))
	wantErrno(t, err, unix.EACCES, "read proj/readme.txt (hard link of proj/.env made after the mount)")

	if d := before.diff(stateOf(t, m.BackingPath("notes.txt"))); d != "" {
		t.Errorf("notes.txt changed: %s", d)
	}
	m.WaitAudit("notes.txt", func(e auditEntry) bool {
		return e.path() == "notes.txt" && e.str("code") == "CREDENTIAL_PATH_DENIED"
	})
	m.WaitAudit("proj/readme.txt", func(e auditEntry) bool {
		return e.path() == "proj/readme.txt" && e.str("code") == "CREDENTIAL_PATH_DENIED"
	})
}

// writePolicy writes a policy file into a fresh temp dir.
func writePolicy(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyAllowDeny: allow re-permits exactly the listed paths; deny
// adds to the set; defaults: false drops the built-in set.
func TestPolicyAllowDeny(t *testing.T) {
	t.Parallel()
	// Public CA bundles the built-in set would deny as *.pem: pip fails
	// in a virtualenv without them.
	const certifi = "venv/lib/python3.11/site-packages/certifi/cacert.pem"
	const pipCertifi = "venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem"
	files := []string{"app/.env.example", "app/.env", "other/.env.example", "config/test.pem",
		"config/prod.pem", "config/sub/test.pem", "secrets/a.txt", "secrets/deep/b.json", "x/y.secret",
		"notsecrets/a.txt", "plain.txt", "only/o.txt", "keys/id_rsa", "certs/cacert.pem", certifi, pipCertifi}
	for _, tc := range []struct {
		name    string
		policy  string
		allowed []string // the rest of files is denied
	}{
		{"allow", `version: 1
credentials:
  allow: ["app/.env.example", "config/test.pem"]
`, []string{"app/.env.example", "other/.env.example", "config/test.pem", "secrets/a.txt", "secrets/deep/b.json", "x/y.secret",
			"notsecrets/a.txt", "plain.txt", "only/o.txt", certifi, pipCertifi}},
		{"deny", `version: 1
credentials:
  deny: ["secrets/**", "**/*.secret"]
`, []string{"app/.env.example", "other/.env.example", "notsecrets/a.txt", "plain.txt", "only/o.txt", certifi, pipCertifi}},
		{"allow-over-deny", `version: 1
credentials:
  deny: ["secrets/**"]
  allow: ["secrets/deep/*.json", "**/.env.example"]
`, []string{"app/.env.example", "other/.env.example", "secrets/deep/b.json", "x/y.secret",
			"notsecrets/a.txt", "plain.txt", "only/o.txt", certifi, pipCertifi}},
		{"no-defaults", `version: 1
credentials:
  defaults: false
  deny: ["only/**"]
`, []string{"app/.env.example", "app/.env", "other/.env.example", "config/test.pem", "config/prod.pem",
			"config/sub/test.pem", "secrets/a.txt", "secrets/deep/b.json", "x/y.secret",
			"notsecrets/a.txt", "plain.txt", "keys/id_rsa", "certs/cacert.pem", certifi, pipCertifi}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pol := writePolicy(t, tc.policy)
			m := mount(t, Flags("--policy", pol), Prepare(func(m *Mount) {
				for _, f := range files {
					writeFile(t, m.BackingPath(f), "content of "+f+"\n")
				}
			}))
			for _, f := range files {
				want := "content of " + f + "\n"
				data, err := os.ReadFile(m.Path(f))
				werr := os.WriteFile(m.Path(f), []byte("rewritten "+f+"\n"), 0o644)
				if slices.Contains(tc.allowed, f) {
					if err != nil || string(data) != want {
						t.Errorf("%s: read %q %v, want it allowed", f, data, err)
					}
					if werr != nil {
						t.Errorf("%s: write: %v, want it allowed", f, werr)
					} else if got := readFile(t, m.BackingPath(f)); got != "rewritten "+f+"\n" {
						t.Errorf("%s: BACKING holds %q after an allowed write", f, got)
					}
				} else {
					wantErrno(t, err, unix.EACCES, f+": read")
					wantErrno(t, werr, unix.EACCES, f+": write")
					if got := readFile(t, m.BackingPath(f)); got != want {
						t.Errorf("%s: BACKING holds %q after a refused write", f, got)
					}
				}
			}
		})
	}
}

// TestPolicyHide: with hide: true, a credential vanishes (lookup ENOENT,
// not listed, open ENOENT) and the refusal is audited; innocent files stay.
func TestPolicyHide(t *testing.T) {
	t.Parallel()
	pol := writePolicy(t, "version: 1\ncredentials:\n  hide: true\n")
	m := mount(t, Flags("--policy", pol), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "A=1\n")
		writeFile(t, m.BackingPath("keys", "id_ed25519"), "KEY\n")
		writeFile(t, m.BackingPath("keys", "id_ed25519.txt.not"), "KEY\n") // id_ed25519* matches too
		writeFile(t, m.BackingPath("keys", "README"), "innocent\n")
		writeFile(t, m.BackingPath("plain.txt"), "innocent\n")
	}))
	writeFile(t, m.BackingPath("later", ".aws", "credentials"), "[default]\n")
	for _, p := range []string{".env", "keys/id_ed25519", "keys/id_ed25519.txt.not", "later/.aws/credentials"} {
		_, err := os.Lstat(m.Path(p))
		wantErrno(t, err, unix.ENOENT, "lstat "+p+" with hide")
		_, err = os.ReadFile(m.Path(p))
		wantErrno(t, err, unix.ENOENT, "read "+p+" with hide")
	}
	for dir, want := range map[string][]string{"": {"keys", "later", "plain.txt"}, "keys": {"README"}, "later": {}} {
		ents, err := os.ReadDir(m.Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("ls %q with hide = %v, want %v", dir, got, want)
		}
	}
	if got := readFile(t, m.Path("keys", "README")); got != "innocent\n" {
		t.Errorf("keys/README = %q", got)
	}
	e := m.WaitAudit("hidden lookup of .env", func(e auditEntry) bool {
		return e.path() == ".env" && e.str("code") == "CREDENTIAL_PATH_DENIED"
	})
	if !e.errnoIs(unix.ENOENT) {
		t.Errorf("audit of a hidden lookup: errno %q, want ENOENT", e.str("errno"))
	}
	checkAuditFields(t, e)
	// .aws itself matches **/.aws/** and is hidden at its own lookup.
	m.WaitAudit("hidden lookup of later/.aws", func(e auditEntry) bool {
		return strings.HasPrefix(e.path(), "later/.aws") && e.str("code") == "CREDENTIAL_PATH_DENIED"
	})
}

// TestPolicyInvalid: a bad policy is exit 2 with file:line:field, for
// --check-policy and for a mount attempt, and nothing is mounted.
func TestPolicyInvalid(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	for _, tc := range []struct {
		name, body string
		line       int
		field      string
	}{
		{"unknown key", "version: 1\ncredentials:\n  defaults: true\n  bogus: 1\n", 4, "credentials.bogus"},
		{"wrong type", "version: 1\ncredentials:\n  hide: maybe\n", 3, "credentials.hide"},
		{"absolute glob", "version: 1\ncredentials:\n  deny:\n    - \"ok/**\"\n    - \"/etc/x\"\n", 5, "credentials.deny"},
		{"bad glob syntax", "version: 1\ncredentials:\n  allow: [\"a/[b\"]\n", 3, "credentials.allow"},
		{"dotdot glob", "version: 1\ncredentials:\n  deny: [\"a/../b\"]\n", 3, "credentials.deny"},
		{"bad version", "# comment\nversion: 2\n", 2, "version"},
		{"duplicate key", "version: 1\nsymlinks: inside-only\nsymlinks: inside-only\n", 3, "symlinks"},
		{"bad symlinks", "version: 1\nsymlinks: follow\n", 2, "symlinks"},
		{"relative audit path", "version: 1\naudit:\n  path: logs/audit.jsonl\n", 3, "audit.path"},
		{"unknown top-level key", "version: 1\negress: []\n", 2, "egress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pol := writePolicy(t, tc.body)
			wantLoc := fmt.Sprintf("%s:%d:", pol, tc.line)
			check := func(what string, code int, out string) {
				t.Helper()
				if code != 2 {
					t.Errorf("%s: exit %d, want 2\n%s", what, code, out)
				}
				if !strings.Contains(out, "SCHEMA_INVALID") || !strings.Contains(out, wantLoc) || !strings.Contains(out, tc.field) {
					t.Errorf("%s: message %q, want SCHEMA_INVALID, %q and field %q", what, out, wantLoc, tc.field)
				}
			}
			code, out := exitOf(exec.Command(realmfsBin, "--check-policy", pol))
			check("--check-policy", code, out)

			root := t.TempDir()
			backing, mnt := filepath.Join(root, "b"), filepath.Join(root, "m")
			for _, d := range []string{backing, mnt} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			before := mountPoints(t)
			for _, args := range [][]string{{"-f"}, {}} { // foreground and detached
				args = append(args, "--policy", pol, backing, mnt)
				code, out = exitOf(exec.Command(realmfsBin, args...))
				check(fmt.Sprintf("realmfs %s", strings.Join(args, " ")), code, out)
				if _, ok := mountFSType(mnt); ok {
					t.Errorf("%s is mounted after an invalid policy", mnt)
					exec.Command("umount", "-l", mnt).Run()
				}
			}
			if after := mountPoints(t); after[mnt] || after[backing] || countUnder(after, root) != countUnder(before, root) {
				t.Errorf("mountinfo changed under %s", root)
			}
		})
	}
	// A valid one passes.
	pol := writePolicy(t, "version: 1\ncredentials:\n  deny: [\"secrets/**\"]\n  allow: [\"**/.env.example\"]\n  hide: false\nsymlinks: inside-only\naudit:\n  path: /var/log/realm/audit.jsonl\n")
	if code, out := exitOf(exec.Command(realmfsBin, "--check-policy", pol)); code != 0 {
		t.Errorf("--check-policy of a valid policy: exit %d\n%s", code, out)
	}
}

// exitOf runs cmd (bounded) and returns its exit status and combined output.
func exitOf(cmd *exec.Cmd) (int, string) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return -1, err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		return -1, out.String() + " (killed after 20s)"
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// mountPoints is the set of mount points in /proc/self/mountinfo.
func mountPoints(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out[unescapeMountinfo(f[4])] = true
		}
	}
	return out
}

func countUnder(set map[string]bool, root string) int {
	n := 0
	for p := range set {
		if p == root || strings.HasPrefix(p, root+"/") {
			n++
		}
	}
	return n
}

// TestAuditOneLinePerRefusal: a known sequence of refusals gives exactly
// one audit line each, with op, path, code, errno, pid and uid.
func TestAuditOneLinePerRefusal(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("lockowner=pid"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "A=1\n")
		writeFile(t, m.BackingPath("keys", "server.key"), "KEY\n")
		writeFile(t, m.BackingPath("notes.txt"), "n\n")
		if err := os.Symlink("/etc/passwd", m.BackingPath("escape")); err != nil {
			t.Fatal(err)
		}
	}))
	// Warm lookups first so that the refusals below are the only requests
	// that can be refused.
	for _, p := range []string{".env", "keys/server.key", "notes.txt", "escape"} {
		if _, err := os.Lstat(m.Path(p)); err != nil {
			t.Fatal(err)
		}
	}
	type refusal struct {
		op, path, code string
		errno          syscall.Errno
		do             func() error
	}
	seq := []refusal{
		{"open", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error { return closeFd(unix.Open(m.Path(".env"), unix.O_RDONLY|unix.O_CLOEXEC, 0)) }},
		{"open", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error { return closeFd(unix.Open(m.Path(".env"), unix.O_WRONLY|unix.O_CLOEXEC, 0)) }},
		{"open", "keys/server.key", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error {
			return closeFd(unix.Open(m.Path("keys/server.key"), unix.O_RDONLY|unix.O_CLOEXEC, 0))
		}},
		{"rename", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error { return unix.Rename(m.Path(".env"), m.Path("env.txt")) }},
		{"link", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error { return unix.Link(m.Path(".env"), m.Path("env2.txt")) }},
		{"readlink", "escape", "PATH_ESCAPE", unix.EACCES, func() error { _, err := os.Readlink(m.Path("escape")); return err }},
		{"open", ".env", "CREDENTIAL_PATH_DENIED", unix.EACCES, func() error { return closeFd(unix.Open(m.Path(".env"), unix.O_RDONLY|unix.O_CLOEXEC, 0)) }},
	}
	var results []error
	lockedThread(func() {
		for _, r := range seq {
			results = append(results, r.do())
		}
	})
	for i, r := range seq {
		wantErrno(t, results[i], r.errno, fmt.Sprintf("refusal %d (%s %s)", i, r.op, r.path))
	}
	// A last refusal of a name of its own marks the end: once its line is
	// there, every line the sequence made (a straggler too) is before it.
	if err := unix.Symlink("/etc", m.Path("mark")); err != unix.EACCES {
		t.Fatalf("the closing refusal (an absolute symlink): %v, want EACCES", err)
	}
	m.WaitAudit("the closing refusal", func(e auditEntry) bool { return e.path() == "mark" })
	entries := m.Audit()
	if n := len(entries); n != len(seq)+1 || entries[n-1].path() != "mark" {
		t.Errorf("audit log has %d lines for %d refusals and the closing one", n, len(seq))
	}
	entries = entries[:min(len(entries), len(seq))]
	for i := range min(len(entries), len(seq)) {
		e, r := entries[i], seq[i]
		checkAuditFields(t, e)
		if e.str("op") != r.op || e.path() != r.path || e.str("code") != r.code || !e.errnoIs(r.errno) {
			t.Errorf("audit line %d = op %q path %q code %q errno %q; want %s %s %s %s",
				i+1, e.str("op"), e.path(), e.str("code"), e.str("errno"), r.op, r.path, r.code, unix.ErrnoName(r.errno))
		}
		pid, _ := strconv.Atoi(e.str("pid"))
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", pid)); pid <= 0 || err != nil {
			t.Errorf("audit line %d: pid %q is not a thread of the test process", i+1, e.str("pid"))
		}
		if e.str("uid") != "0" {
			t.Errorf("audit line %d: uid %q, want 0", i+1, e.str("uid"))
		}
		if !strings.HasPrefix(e.str("owner"), "pid:") {
			t.Errorf("audit line %d: owner %q, want pid:N under lockowner=pid", i+1, e.str("owner"))
		}
	}
}

// refusalsOf counts the audit lines refusing path as a credential, by op
// unless op is "".
func refusalsOf(m *Mount, op, path string) int {
	n := 0
	for _, e := range m.Audit() {
		if (op == "" || e.str("op") == op) && e.path() == path && e.str("code") == "CREDENTIAL_PATH_DENIED" {
			n++
		}
	}
	return n
}

// wantNewRefusal waits for a credential refusal of path by op beyond the
// before lines counted earlier (refusalsOf), with errno EACCES.
func wantNewRefusal(t *testing.T, m *Mount, op, path string, before int) {
	t.Helper()
	seen := 0
	m.WaitAudit(fmt.Sprintf("refusal %d of %s %s", before+1, op, path), func(e auditEntry) bool {
		if e.str("op") == op && e.path() == path && e.str("code") == "CREDENTIAL_PATH_DENIED" {
			if !e.errnoIs(unix.EACCES) {
				t.Errorf("audit of %s %s: errno %q, want EACCES", op, path, e.str("errno"))
			}
			seen++
		}
		return seen > before
	})
}

// wantReadRefused checks that reading path through the mount is refused
// (cat and open(2)) with a new audit line, and that the secret was not
// printed.
func wantReadRefused(t *testing.T, m *Mount, rel, secret, what string) {
	t.Helper()
	before := refusalsOf(m, "open", rel)
	out, err := runErr(t, m.Dir, nil, "cat", "--", rel)
	if err == nil || strings.Contains(out, secret) || !strings.Contains(out, "Permission denied") {
		t.Errorf("%s: cat %s: %v, output %q; want Permission denied and no secret", what, rel, err, out)
	}
	_, err = os.ReadFile(m.Path(rel))
	wantErrno(t, err, unix.EACCES, what+": read "+rel)
	wantNewRefusal(t, m, "open", rel, before)
}

// waitScanned returns once the mount-time scan has finished: an open of a
// file with two links waits for it (whatever the guard decides).
func waitScanned(t *testing.T, m *Mount, rel string) {
	t.Helper()
	if st := lstat(t, m.BackingPath(rel)); st.Nlink < 2 {
		t.Fatalf("%s has %d links; waitScanned needs a multiply-linked file", rel, st.Nlink)
	}
	if _, err := os.ReadFile(m.Path(rel)); err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
}

// TestCredentialUnlinkKeepsIdentity (issue 19, item 1): a credential
// hard-linked in BACKING under an innocent name stays refused under that
// name after its credential name is removed through the mount, though the
// file then has one link.
func TestCredentialUnlinkKeepsIdentity(t *testing.T) {
	t.Parallel()
	const secret = "-----BEGIN OPENSSH PRIVATE KEY----- hl\n"
	m := mount(t, Opts("allow_other"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".ssh", "id_ed25519"), secret)
		if err := os.Link(m.BackingPath(".ssh", "id_ed25519"), m.BackingPath("notes_hl.txt")); err != nil {
			t.Fatal(err)
		}
	}))
	before := stateOf(t, m.BackingPath("notes_hl.txt"))
	wantReadRefused(t, m, "notes_hl.txt", secret, "two links")

	// Removing the credential's name is allowed (README: removal is not
	// refused); the identity stays a credential.
	if err := os.Remove(m.Path(".ssh", "id_ed25519")); err != nil {
		t.Fatalf("rm .ssh/id_ed25519 through the mount: %v", err)
	}
	assertAbsent(t, m.BackingPath(".ssh", "id_ed25519"))
	if n := m.backingLinks(t, m.BackingPath("notes_hl.txt")); n != 1 {
		t.Fatalf("notes_hl.txt has %d links after the rm (the journal's kept links not counted), want 1", n)
	}
	wantReadRefused(t, m, "notes_hl.txt", secret, "after rm of the credential name")
	// Renamed through the mount to yet another innocent name: still refused.
	if err := os.Rename(m.Path("notes_hl.txt"), m.Path("moved.txt")); err != nil {
		t.Fatalf("mv notes_hl.txt moved.txt: %v", err)
	}
	wantReadRefused(t, m, "moved.txt", secret, "after rm and mv")
	if d := before.diff(stateOf(t, m.BackingPath("moved.txt"))); d != "" {
		t.Errorf("the key changed in BACKING: %s", d)
	}
}

// TestCredentialLinkAfterScan: a hard link made in BACKING, after the
// mount-time scan, to a credential the scan saw is refused, and stays
// refused once the credential's own name is gone from BACKING; so is a
// credential renamed in BACKING to an innocent name.
func TestCredentialLinkAfterScan(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("proj", ".env"), "TOKEN=scan\n")
		writeFile(t, m.BackingPath("keys", "server.key"), "KEY=scan\n")
		writeFile(t, m.BackingPath("a.txt"), "innocent, two links\n")
		if err := os.Link(m.BackingPath("a.txt"), m.BackingPath("b.txt")); err != nil {
			t.Fatal(err)
		}
	}))
	waitScanned(t, m, "b.txt")
	if err := os.Link(m.BackingPath("proj", ".env"), m.BackingPath("proj", "later.txt")); err != nil {
		t.Fatal(err)
	}
	wantReadRefused(t, m, "proj/later.txt", "TOKEN", "linked after the scan")
	if err := os.Remove(m.BackingPath("proj", ".env")); err != nil {
		t.Fatal(err)
	}
	wantReadRefused(t, m, "proj/later.txt", "TOKEN", "linked after the scan, credential name removed in BACKING")
	if err := os.Rename(m.BackingPath("keys", "server.key"), m.BackingPath("keys", "server.txt")); err != nil {
		t.Fatal(err)
	}
	wantReadRefused(t, m, "keys/server.txt", "KEY", "renamed in BACKING after the scan")
	if got := readFile(t, m.Path("a.txt")); got != "innocent, two links\n" {
		t.Errorf("a.txt = %q", got)
	}
}

// metaState is every attribute a metadata change would touch, and the
// content: what a refused chmod, chown or utimensat must leave as it was.
// The ctime proves no change at all reached the file.
type metaState struct {
	data       string
	ino        uint64
	mode       uint32
	uid, gid   uint32
	mtim, ctim unix.Timespec
	size       int64
}

func metaOf(t *testing.T, path string) metaState {
	t.Helper()
	st := lstat(t, path)
	return metaState{data: readFile(t, path), ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid,
		mtim: st.Mtim, ctim: st.Ctim, size: st.Size}
}

// TestCredentialMetadataRefused (issue 19, item 2): chmod, chown and
// utimensat of a credential, by its name or by an innocent hard link's, are
// refused (EACCES, audited as setattr), as system calls and as programs;
// the file stays byte- and stat-identical; stat still works.
func TestCredentialMetadataRefused(t *testing.T) {
	t.Parallel()
	requireTool(t, "chmod", "chown", "touch")
	m := mount(t, Opts("allow_other"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath(".env"), "SECRET=1\n")
		writeFile(t, m.BackingPath(".ssh", "id_ed25519"), "KEY\n")
		if err := os.Link(m.BackingPath(".ssh", "id_ed25519"), m.BackingPath("key_hl.txt")); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{".env", ".ssh/id_ed25519"} {
			if err := os.Chmod(m.BackingPath(p), 0o600); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(m.BackingPath(p), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}))
	for _, rel := range []string{".env", ".ssh/id_ed25519", "key_hl.txt"} {
		before := metaOf(t, m.BackingPath(rel))
		p := m.Path(rel)
		then := unix.NsecToTimespec(time.Now().Add(-48 * time.Hour).UnixNano())
		for _, op := range []struct {
			name string
			do   func() error
		}{
			{"chmod 666", func() error { return unix.Chmod(p, 0o666) }},
			{"chown 1000:1000", func() error { return unix.Chown(p, 1000, 1000) }},
			{"chown -1:1000", func() error { return unix.Chown(p, -1, 1000) }},
			{"utimensat now", func() error { return unix.UtimesNano(p, nil) }},
			{"utimensat to a time", func() error { return unix.UtimesNano(p, []unix.Timespec{then, then}) }},
		} {
			n := refusalsOf(m, "setattr", rel)
			wantErrno(t, op.do(), unix.EACCES, rel+": "+op.name)
			wantNewRefusal(t, m, "setattr", rel, n)
		}
		for _, prog := range [][]string{{"chmod", "666"}, {"chown", "1000:1000"}, {"touch"}, {"touch", "-d", "2001-01-01"}} {
			args := append(prog, "--", rel)
			if out, err := runErr(t, m.Dir, nil, args[0], args[1:]...); err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("%s: %v %q; want Permission denied", strings.Join(args, " "), err, out)
			}
		}
		// stat is read-only metadata: it works, and shows the file as it is.
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Errorf("stat %s: %v", rel, err)
		} else if st.Mode != before.mode || st.Uid != before.uid || st.Gid != before.gid || st.Mtim != before.mtim || st.Size != before.size {
			t.Errorf("stat %s through the mount: mode %o uid %d gid %d mtime %v size %d; BACKING had %o %d %d %v %d",
				rel, st.Mode, st.Uid, st.Gid, st.Mtim, st.Size, before.mode, before.uid, before.gid, before.mtim, before.size)
		}
		if after := metaOf(t, m.BackingPath(rel)); after != before {
			t.Errorf("%s changed in BACKING after refused metadata changes:\nbefore %+v\nafter  %+v", rel, before, after)
		}
	}
}
