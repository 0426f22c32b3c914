package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCorpus runs real programs' whole workflows (git with nested
// submodules, npm, a recursive make, a Python venv with pip) twice: once in
// a native directory and once on a fresh mount, with the same script and
// environment. Each run must end with the same exit status and leave the
// same tree (paths, types, modes, sizes, content hashes), apart from
// exclusions that each name why the files legitimately differ. The mount's
// view must equal BACKING's, and the audit log must stay empty: nothing
// here touches anything secret, so any refusal is a finding.
func TestCorpus(t *testing.T) {
	t.Parallel()
	for _, tc := range []corpusCase{
		corpusGit(),
		corpusNpm(),
		corpusMake(),
		corpusPython(),
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireTool(t, tc.tools...)
			t.Parallel()
			runCorpusCase(t, tc)
		})
	}
}

// corpusCase is one program of the corpus.
type corpusCase struct {
	name  string
	tools []string
	// setup makes the inputs both runs share, outside both trees, and
	// returns environment variables naming them.
	setup func(t *testing.T, shared string) []string
	// script runs under sh -e in the (empty) tree's root, with HOME set to
	// a per-run directory outside the tree.
	script string
	// want are strings the script's output must contain in both runs.
	want []string
	// ignore are the files whose content legitimately differs.
	ignore []ignoreRule
}

// ignoreRule says that the content of the files it matches is not compared:
// they must still exist in both trees with the same type and mode.
type ignoreRule struct {
	match func(rel string) bool
	why   string
}

// corpusEnv is the environment of every run: fixed identities and dates so
// that tools which record them write the same bytes in both runs, no
// network, no update checks.
var corpusEnv = []string{
	"LC_ALL=C", "TZ=UTC",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=Realm Test", "GIT_AUTHOR_EMAIL=test@realm.invalid",
	"GIT_COMMITTER_NAME=Realm Test", "GIT_COMMITTER_EMAIL=test@realm.invalid",
	"GIT_AUTHOR_DATE=2020-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2020-01-02T03:04:05Z",
	// Local file:// submodules need protocol.file.allow (git 2.38.1+);
	// gc in the foreground, so that nothing runs after the script ends;
	// one thread for delta search, so that packs are the same bytes.
	"GIT_CONFIG_COUNT=4",
	"GIT_CONFIG_KEY_0=protocol.file.allow", "GIT_CONFIG_VALUE_0=always",
	"GIT_CONFIG_KEY_1=gc.autoDetach", "GIT_CONFIG_VALUE_1=false",
	"GIT_CONFIG_KEY_2=init.defaultBranch", "GIT_CONFIG_VALUE_2=main",
	"GIT_CONFIG_KEY_3=pack.threads", "GIT_CONFIG_VALUE_3=1",
	"npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false",
	"npm_config_update_notifier=false",
	"PIP_NO_INDEX=1", "PIP_NO_CACHE_DIR=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
}

// runCorpusCase runs tc natively and on a mount and compares the results.
func runCorpusCase(t *testing.T, tc corpusCase) {
	shared := t.TempDir()
	var env []string
	if tc.setup != nil {
		env = tc.setup(t, shared)
	}
	native := filepath.Join(t.TempDir(), "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mount(t)
	dir := m.Path(strings.ReplaceAll(tc.name, " ", "_"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Both runs at once: they share nothing but the inputs setup made.
	nativeHome, mountHome := t.TempDir(), t.TempDir()
	nativeDone := make(chan corpusResult, 1)
	go func() { nativeDone <- corpusRun(tc, native, nativeHome, env) }()
	onMount := corpusRun(tc, dir, mountHome, env)
	natively := <-nativeDone
	for _, r := range []corpusResult{natively, onMount} {
		if r.err != nil {
			t.Fatalf("running the script in %s: %v\n%s", r.dir, r.err, r.out)
		}
	}
	t.Logf("natively %v, on the mount %v", natively.took.Round(time.Millisecond), onMount.took.Round(time.Millisecond))
	if natively.code != 0 {
		t.Fatalf("natively (%s) the script exited %d; the test itself is wrong:\n%s", native, natively.code, natively.out)
	}
	for _, w := range tc.want {
		if !strings.Contains(natively.out, w) {
			t.Fatalf("natively the output lacks %q; the test itself is wrong:\n%s", w, natively.out)
		}
	}
	if onMount.code != natively.code {
		t.Errorf("on the mount the script exited %d, natively %d; its output on the mount:\n%s", onMount.code, natively.code, onMount.out)
	}
	for _, w := range tc.want {
		if !strings.Contains(onMount.out, w) {
			t.Errorf("output on the mount lacks %q:\n%s", w, onMount.out)
		}
	}
	if strings.Contains(onMount.out, "getcwd") {
		t.Errorf("output on the mount mentions getcwd:\n%s", onMount.out)
	}

	want := corpusTree(t, native)
	got := corpusTree(t, dir)
	d, ignored := diffTrees(want, got, tc.ignore)
	t.Logf("compared %d names", len(want))
	for _, r := range tc.ignore {
		t.Logf("content not compared of %d files: %s", ignored[r.why], r.why)
	}
	if len(d) > 0 {
		t.Errorf("the tree on the mount (got) differs from the native one (want) (%d differences):\n%s", len(d), clipLines(d, 40))
	}
	// BACKING holds what the mount shows, byte for byte (no exclusions).
	if d, _ := diffTrees(got, corpusTreeAs(t, m.BackingPath(filepath.Base(dir)), dir), nil); len(d) > 0 {
		t.Errorf("BACKING (got) differs from the mount's view (want) (%d differences):\n%s", len(d), clipLines(d, 40))
	}
	assertNoTemp(t, m.Backing, tc.name)
	for _, e := range m.Audit() {
		t.Errorf("audit log has a refusal during %s (nothing here is secret): op %s path %s code %s errno %s pid %s",
			tc.name, e.str("op"), e.path(), e.str("code"), e.str("errno"), e.str("pid"))
	}
}

// corpusResult is how one run of a script ended.
type corpusResult struct {
	dir  string
	out  string // stdout and stderr
	code int    // exit status
	err  error  // the script could not be run, or was killed
	took time.Duration
}

// corpusRun runs tc's script in dir with HOME (and so every cache of the
// run) at home, outside the tree.
func corpusRun(tc corpusCase, dir, home string, env []string) corpusResult {
	runEnv := slices.Concat(corpusEnv, env, []string{"HOME=" + home, "npm_config_cache=" + filepath.Join(home, "npm-cache")})
	// A hang guard only: a loaded machine and a race-built daemon make a
	// run several times slower, which is no failure.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", tc.script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runEnv...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := corpusResult{dir: dir, out: string(out), took: time.Since(start)}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() >= 0 {
		r.code = exit.ExitCode()
	} else {
		r.err = err
	}
	return r
}

// treeEntry is what the corpus compares of one name in a tree.
type treeEntry struct {
	typ  fs.FileMode // the type bits
	perm fs.FileMode // permission, setuid, setgid and sticky bits
	size int64       // of a regular file or symlink target, once the run dir is replaced; directories' sizes are the filesystem's own
	hash string      // sha256 of that content
}

func (e treeEntry) String() string {
	typ := map[fs.FileMode]string{0: "file", fs.ModeDir: "dir", fs.ModeSymlink: "symlink"}[e.typ]
	if typ == "" {
		typ = e.typ.String()
	}
	return fmt.Sprintf("%s %04o size %d sha256 %.12s", typ, uint32(e.perm), e.size, e.hash)
}

// corpusTree records every name beneath root.
func corpusTree(t *testing.T, root string) map[string]treeEntry {
	return corpusTreeAs(t, root, root)
}

// corpusTreeAs records every name beneath root, where the programs ran
// in ranIn: each occurrence of ranIn in a file or a symlink target is
// replaced by a placeholder before hashing, since a native run and a run
// on the mount happen in different directories (a venv writes its own
// path into its scripts and pyvenv.cfg, pip into direct_url.json).
func corpusTreeAs(t *testing.T, root, ranIn string) map[string]treeEntry {
	t.Helper()
	placeholder := []byte("@RUN_DIR@")
	tree := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if liveMark.MatchString(rel) && d.IsDir() {
			return fs.SkipDir // the live daemons' marks of their temps (tempResidue)
		}
		e := treeEntry{typ: info.Mode().Type(), perm: info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
		var data []byte
		switch {
		case info.Mode().IsRegular():
			data, err = os.ReadFile(p)
		case info.Mode()&fs.ModeSymlink != 0:
			var target string
			target, err = os.Readlink(p)
			data = []byte(target)
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			data = bytes.ReplaceAll(data, []byte(ranIn), placeholder)
			sum := sha256.Sum256(data)
			e.size, e.hash = int64(len(data)), hex.EncodeToString(sum[:])
		}
		tree[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return tree
}

// diffTrees describes how got differs from want, sorted by path, and counts
// the files whose content differs as an ignore rule allows, by its why.
func diffTrees(want, got map[string]treeEntry, ignore []ignoreRule) (out []string, ignored map[string]int) {
	ignored = map[string]int{}
	for rel, w := range want {
		g, ok := got[rel]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: missing (want %v)", rel, w))
		case g.typ != w.typ || g.perm != w.perm:
			out = append(out, fmt.Sprintf("%s: %v, want %v", rel, g, w))
		case g.size != w.size || g.hash != w.hash:
			if i := slices.IndexFunc(ignore, func(r ignoreRule) bool { return r.match(rel) }); i >= 0 {
				ignored[ignore[i].why]++
			} else {
				out = append(out, fmt.Sprintf("%s: content %v, want %v", rel, g, w))
			}
		}
	}
	for rel, g := range got {
		if _, ok := want[rel]; !ok {
			out = append(out, fmt.Sprintf("%s: extra (%v)", rel, g))
		}
	}
	slices.Sort(out)
	return out, ignored
}

func clipLines(lines []string, n int) string {
	if len(lines) > n {
		lines = append(lines[:n:n], fmt.Sprintf("... and %d more", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// pathHas reports whether the slash-separated rel has a component elem.
func pathHas(rel, elem string) bool {
	return slices.Contains(strings.Split(rel, "/"), elem)
}

// corpusGit: a clone with nested submodules (A has B, B has C, all local
// file:// repositories made outside both trees), a rebase of a branch whose
// commits touch the same file as the other branch's and others, then
// git gc --aggressive and git fsck --full in every repository.
func corpusGit() corpusCase {
	return corpusCase{
		name:  "git",
		tools: []string{"git"},
		setup: func(t *testing.T, shared string) []string {
			src := filepath.Join(shared, "src")
			run(t, shared, slices.Concat(corpusEnv, []string{"SRC=" + src}), "sh", "-ec", `
for r in C B A; do git init -q "$SRC/$r"; done
cd "$SRC/C"
echo c > c.txt
git add . && git commit -q -m "C: first"
cd "$SRC/B"
echo b > b.txt
git submodule add -q "file://$SRC/C" sub/C
git add . && git commit -q -m "B: first, with C"
cd "$SRC/A"
printf '1\n2\n3\n4\n5\n6\n7\n8\n' > shared.txt
echo a > a.txt
git submodule add -q "file://$SRC/B" sub/B
git add . && git commit -q -m "A: first, with B"
`)
			return []string{"SRC=" + src}
		},
		script: `
git clone -q --recurse-submodules "file://$SRC/A" clone
cd clone
test "$(cat sub/B/sub/C/c.txt)" = c
git checkout -q -b topic
sed -i 's/^2$/two/' shared.txt
echo t > topic.txt
git add . && git commit -q -m "topic: two, topic.txt"
sed -i 's/^7$/seven/' shared.txt
git commit -q -am "topic: seven"
git checkout -q main
sed -i 's/^4$/four/' shared.txt
echo m > main.txt
git add . && git commit -q -m "main: four, main.txt"
git checkout -q topic
git rebase -q main
test "$(tr '\n' ' ' < shared.txt)" = "1 two 3 four 5 6 seven 8 "
test -f main.txt && test -f topic.txt
echo "rebased: $(git log --format=%s main..topic | tr '\n' ',')"
git gc -q --aggressive
git fsck --full --no-progress --no-dangling
git submodule foreach -q --recursive 'git gc -q --aggressive && git fsck --full --no-progress --no-dangling'
git status --porcelain --ignore-submodules=none
echo "submodules: $(git submodule status --recursive | wc -l)"
`,
		want: []string{"rebased: topic: seven,topic: two, topic.txt,", "submodules: 2"},
		ignore: []ignoreRule{{
			match: func(rel string) bool { return pathHas(rel, ".git") && filepath.Base(rel) == "index" },
			why:   "git's index caches the stat data (times, inode and device numbers) of the work tree's files",
		}},
	}
}

// corpusNpm: npm pack of two local packages (tiny, with a bin entry and a
// postinstall script that writes a file, depends on leaf), npm install of
// both tarballs by path, then npm ci from the lockfile. Offline: nothing
// comes from a registry. npm's cache is in the run's HOME, outside the
// tree, so it needs no exclusion.
func corpusNpm() corpusCase {
	return corpusCase{
		name:  "npm",
		tools: []string{"npm", "node"},
		script: `
mkdir -p pkgs/leaf pkgs/tiny/bin app
cd pkgs/leaf
cat > package.json <<'EOF'
{"name": "leaf", "version": "1.0.0", "main": "index.js", "license": "MIT"}
EOF
echo 'module.exports = (s) => "leaf:" + s;' > index.js
npm pack -q --pack-destination .. >/dev/null
cd ../tiny
cat > package.json <<'EOF'
{"name": "tiny", "version": "1.0.0", "main": "index.js", "license": "MIT",
 "bin": {"tiny-hello": "bin/hello.js"},
 "dependencies": {"leaf": "1.0.0"},
 "scripts": {"postinstall": "node postinstall.js"}}
EOF
echo 'const leaf = require("leaf"); module.exports = () => leaf("tiny");' > index.js
printf '#!/usr/bin/env node\nconsole.log(require("..")());\n' > bin/hello.js
echo 'require("fs").writeFileSync("postinstall.txt", "postinstall ran");' > postinstall.js
npm pack -q --pack-destination .. >/dev/null
cd ../../app
echo '{"name": "app", "version": "1.0.0", "private": true}' > package.json
npm install -q ../pkgs/leaf-1.0.0.tgz ../pkgs/tiny-1.0.0.tgz
echo "install: $(./node_modules/.bin/tiny-hello) $(cat node_modules/tiny/postinstall.txt)"
rm -r node_modules
npm ci -q
echo "ci: $(./node_modules/.bin/tiny-hello) $(cat node_modules/tiny/postinstall.txt)"
`,
		want: []string{"install: leaf:tiny postinstall ran", "ci: leaf:tiny postinstall ran"},
	}
}

// corpusMake: a C project of several directories built by a recursive,
// parallel make ($(MAKE) -C dir, so make changes directories) with a
// generated header; build, run, make clean, build and run again. gcc's
// temporary files go into the tree too (TMPDIR). Any getcwd error in the
// output fails the test (runCorpusCase checks every case's output).
func corpusMake() corpusCase {
	return corpusCase{
		name:  "make",
		tools: []string{"make", "cc", "ar"},
		script: `
mkdir -p proj/gen proj/lib/text proj/lib/num proj/app proj/.tmp
cd proj
export TMPDIR="$PWD/.tmp"
cat > Makefile <<'EOF'
DIRS = gen lib/text lib/num app
all: app
app: lib/text lib/num
lib/text lib/num: gen
$(DIRS):
	$(MAKE) -C $@
clean:
	for d in $(DIRS); do $(MAKE) -C $$d clean || exit 1; done
.PHONY: all clean $(DIRS)
EOF
cat > gen/Makefile <<'EOF'
version.h: version.txt
	printf '#define VERSION "%s"\n' "$$(cat version.txt)" > version.h.tmp
	mv version.h.tmp version.h
clean:
	rm -f version.h
.PHONY: clean
EOF
echo 1.2.3 > gen/version.txt
for lib in text num; do
	cat > lib/$lib/Makefile <<EOF
CFLAGS = -O2 -Wall -Werror -I../../gen
lib$lib.a: a.o b.o
	\$(AR) rcs \$@ a.o b.o
%.o: %.c ../../gen/version.h $lib.h
	\$(CC) \$(CFLAGS) -c -o \$@ \$<
clean:
	rm -f a.o b.o lib$lib.a
.PHONY: clean
EOF
	printf 'const char *%s_a(void);\nconst char *%s_b(void);\n' $lib $lib > lib/$lib/$lib.h
	printf '#include "%s.h"\n#include "version.h"\nconst char *%s_a(void) { return "%s " VERSION; }\n' $lib $lib $lib > lib/$lib/a.c
	printf '#include "%s.h"\nconst char *%s_b(void) { return "%s-b"; }\n' $lib $lib $lib > lib/$lib/b.c
done
cat > app/Makefile <<'EOF'
CFLAGS = -O2 -Wall -Werror -I../gen -I../lib/text -I../lib/num
prog: main.o ../lib/text/libtext.a ../lib/num/libnum.a
	$(CC) -o $@ main.o -L../lib/text -L../lib/num -ltext -lnum
main.o: main.c ../gen/version.h
	$(CC) $(CFLAGS) -c -o $@ main.c
clean:
	rm -f main.o prog
.PHONY: clean
EOF
cat > app/main.c <<'EOF'
#include <stdio.h>
#include "text.h"
#include "num.h"
int main(void) { printf("%s %s %s %s\n", text_a(), text_b(), num_a(), num_b()); return 0; }
EOF
make -j2
echo "first: $(./app/prog)"
make -j2 clean
test ! -e app/prog && test ! -e gen/version.h && test ! -e lib/num/a.o
make -j2
echo "second: $(./app/prog)"
`,
		want: []string{"first: text 1.2.3 text-b num 1.2.3 num-b", "second: text 1.2.3 text-b num 1.2.3 num-b"},
	}
}

// corpusPython: python3 -m venv --copies in the tree (README: a venv of
// symlinks names the interpreter by absolute path, which the mount
// refuses), a wheel built offline by pip from a local source directory
// whose PEP 517 backend is in the tree (pip wheel --no-index
// --no-build-isolation: the system python may lack the wheel package
// setuptools would need), pip install of the wheel into the venv, then an
// import and the console script from the venv.
func corpusPython() corpusCase {
	return corpusCase{
		name:  "python venv",
		tools: []string{"python3"},
		setup: func(t *testing.T, shared string) []string {
			// The interpreter itself, not a pyenv shim (which would look
			// for pyenv in the run's HOME).
			py := strings.TrimSpace(run(t, "", nil, "python3", "-c", "import sys; print(sys.executable)"))
			return []string{"PYTHON=" + py}
		},
		script: `
mkdir -p src/tiny
cat > src/pyproject.toml <<'EOF'
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]
EOF
cat > src/tiny/__init__.py <<'EOF'
def hello():
    return "hello from tiny"

def main():
    print(hello())
EOF
cat > src/backend.py <<'EOF'
"""A PEP 517 backend that builds tiny's wheel with zipfile alone."""
import base64, hashlib, os, zipfile

DIST = "tiny-1.0.dist-info/"
META = {
    DIST + "METADATA": "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
    DIST + "WHEEL": "Wheel-Version: 1.0\nGenerator: backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    DIST + "entry_points.txt": "[console_scripts]\ntiny-hello = tiny:main\n",
}

def _record(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for name in sorted(os.listdir("tiny")):
        if name.endswith(".py"):
            with open(os.path.join("tiny", name), "rb") as f:
                files["tiny/" + name] = f.read()
    files.update((k, v.encode()) for k, v in META.items())
    record = "".join(_record(k, v) for k, v in files.items()) + DIST + "RECORD,,\n"
    files[DIST + "RECORD"] = record.encode()
    whl = "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in files.items():
            z.writestr(zipfile.ZipInfo(k, date_time=(1980, 1, 1, 0, 0, 0)), v)
    return whl
EOF
"$PYTHON" -m venv --copies venv
venv/bin/python -m pip wheel -q --no-index --no-build-isolation --no-deps -w dist ./src
venv/bin/python -m pip install -q --no-index dist/tiny-1.0-py3-none-any.whl
echo "import: $(venv/bin/python -c 'import tiny; print(tiny.hello())')"
echo "script: $(venv/bin/tiny-hello)"
`,
		want: []string{"import: hello from tiny", "script: hello from tiny"},
		ignore: []ignoreRule{{
			match: func(rel string) bool { return pathHas(rel, "__pycache__") },
			why:   "a .pyc records its source's mtime",
		}, {
			match: func(rel string) bool {
				return filepath.Base(rel) == "RECORD" && strings.HasSuffix(filepath.Dir(rel), ".dist-info")
			},
			why: "pip's RECORD lists the sha256 of the scripts it generated, whose #! line names the venv's absolute path",
		}},
	}
}
