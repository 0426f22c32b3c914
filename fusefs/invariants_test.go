package fusefs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Invariants of the daemon's source, checked by reading it (as gocryptfs's
// test.bash greps its tree): a rule broken is a test failure naming the
// file, the line and the rule.
//
//   - nameCalls: fusefs makes no system call that names its object by path
//     or by (directory fd, name) outside fusefs/dirfd, the one layer that
//     resolves names beneath BACKING without following a link. So no path
//     of BACKING is opened, stat'ed or changed by name anywhere else. The
//     few calls by path fusefs makes on its own files outside BACKING are
//     listed in nameCallsAllowed, each with why.
//   - driver: fusefs/writeproto, the write protocol, is imported only by
//     fusefs/writeengine, the write engine: the one code that drives it,
//     so that no adapter decides a commit beside it.
//   - panics: the daemon's packages have no naked panic: a FUSE request
//     that panics is answered EIO by go-fuse and leaves the daemon's state
//     half changed. Documented unreachable cases would be listed in
//     panicsAllowed; there are none.

// nameCallFuncs are the functions, by import path, that take a path or a
// name to resolve: an open, a stat, a change of the tree or of an object
// named. A call through an fd with an empty name (AT_EMPTY_PATH) is still
// one of them: it belongs with the rest in dirfd.
var nameCallFuncs = map[string][]string{
	"golang.org/x/sys/unix": unixNameCalls,
	"syscall":               unixNameCalls,
	"os": {
		"Open", "OpenFile", "Create", "CreateTemp", "MkdirTemp", "Mkdir", "MkdirAll",
		"Remove", "RemoveAll", "Rename", "Stat", "Lstat", "ReadFile", "WriteFile",
		"ReadDir", "Readlink", "Symlink", "Link", "Chmod", "Chown", "Lchown",
		"Chtimes", "Truncate", "DirFS", "Chdir", "OpenRoot", "OpenInRoot", "CopyFS",
	},
	"io/ioutil":     {"ReadFile", "WriteFile", "ReadDir", "TempFile", "TempDir"},
	"path/filepath": {"Walk", "WalkDir", "Glob", "EvalSymlinks", "Abs"},
}

// unixNameCalls are x/sys/unix's and syscall's calls that resolve a name.
var unixNameCalls = []string{
	"Open", "Openat", "Openat2", "Creat", "OpenByHandleAt", "NameToHandleAt",
	"Unlink", "Unlinkat", "Rmdir", "Rename", "Renameat", "Renameat2",
	"Mkdir", "Mkdirat", "Mknod", "Mknodat", "Symlink", "Symlinkat", "Link", "Linkat",
	"Readlink", "Readlinkat", "Stat", "Lstat", "Fstatat", "Statx", "Statfs",
	"Access", "Faccessat", "Faccessat2", "Chmod", "Fchmodat", "Fchmodat2",
	"Chown", "Lchown", "Fchownat", "Utime", "Utimes", "UtimesNano", "UtimesNanoAt",
	"Futimesat", "Truncate", "Getxattr", "Lgetxattr", "Setxattr", "Lsetxattr",
	"Listxattr", "Llistxattr", "Removexattr", "Lremovexattr", "Chdir", "Chroot",
	"InotifyAddWatch", "FanotifyMark", "Mount", "Unmount", "Exec",
	// A raw system call may be any of the above.
	"Syscall", "Syscall6", "RawSyscall", "RawSyscall6", "SyscallNoError", "RawSyscallNoError",
}

// nameCallsAllowed are the calls by path that fusefs makes outside dirfd,
// each on a file that is not in BACKING, keyed "file function call".
var nameCallsAllowed = map[string]string{
	// The audit log: a file of the daemon's, which cmd/realmfs refuses
	// beneath BACKING (checkOutside).
	"audit/audit.go openLog os.OpenFile":           "opens the audit log",
	"audit/audit.go (*Auditor).rotate os.Rename":   "rotates the audit log to path.1",
	"audit/audit.go (*Auditor).rotate os.OpenFile": "opens the new audit log after a rotation",
	"audit/audit.go (*Auditor).Reopen os.OpenFile": "reopens the audit log (SIGHUP, after logrotate)",
	// realmfs audit -f, following an audit log (not the daemon: the
	// viewer, on the log file it was given).
	"audit/follow.go Follow unix.InotifyAddWatch":                      "watches the audit log for writes",
	"audit/follow.go (*followed).switchIfRotated unix.Stat":            "stats the log's name for a rotation",
	"audit/follow.go (*followed).switchIfRotated os.Open":              "opens the new log after a rotation",
	"audit/follow.go (*followed).switchIfRotated unix.InotifyAddWatch": "watches the new log",
	// /proc/PID of the process a refusal is audited for.
	"audit/audit.go readProgram os.ReadFile": "reads /proc/PID/comm",
	"audit/audit.go readProgram os.Readlink": "reads /proc/PID/exe",
	// sysfs of BACKING's block device: what its ext4 keeps for itself and
	// for root (diskroom), whether it has a journal (writeengine).
	"diskroom/diskroom.go Ext4Attr os.Readlink": "reads /sys/dev/block/MAJ:MIN, the device's name",
	"diskroom/diskroom.go Ext4Attr os.ReadFile": "reads /sys/fs/ext4/DEV/ATTR",
	// The made store (Options.MadeStore): a file in the daemon's state
	// directory, which cmd/realmfs refuses beneath BACKING, replaced by
	// write-temp-then-rename.
	"guard/madestore.go (*Guard).LoadStore os.ReadFile":   "reads the made store",
	"guard/madestore.go (*Guard).SaveStore os.MkdirAll":   "makes the made store's directory",
	"guard/madestore.go (*Guard).SaveStore os.CreateTemp": "writes the made store's temp",
	"guard/madestore.go (*Guard).SaveStore os.Remove":     "removes the temp where the rename did not happen",
	"guard/madestore.go (*Guard).SaveStore os.Rename":     "puts the made store in place",
	// /sys: whether the ext4 filesystem under BACKING has a journal.
	// /proc/PID/status: the umask of the process making an object.
	"guard/umask.go ProcUmask os.ReadFile": "reads /proc/PID/status",
}

// panicsAllowed are the panics of documented unreachable cases, keyed
// "dir/file function" (none so far).
var panicsAllowed = map[string]string{}

// panicDirs are the daemon's packages, from the module root, each with the
// packages beneath it, whose name calls are checked as fusefs's are
// (nameCallsAllowed keys them by their path below fusefs/).
var panicDirs = []string{"fusefs", "locks", "procinfo", "policy", "cmd/realmfs", "errcode"}

// daemonSubpackages are the daemon's packages beneath panicDirs: the
// leaves moved out of fusefs (issue 29) and those it was built with.
// TestInvariants fails unless it parsed each, so that a package moved out
// of the walked tree is not silently left unchecked.
var daemonSubpackages = []string{
	"fusefs/dirfd", "fusefs/writeproto", "fusefs/audit", "fusefs/fdbudget", "fusefs/kernelnotify",
	"fusefs/watch", "fusefs/readhold", "fusefs/requestnotes", "fusefs/dircache", "fusefs/guard",
	"fusefs/writeengine", "fusefs/reclock", "fusefs/inodes", "fusefs/admit", "fusefs/kernelcheck",
	"fusefs/nodeopens", "fusefs/journal", "fusefs/diskroom", "fusefs/nameops",
}

// TestInvariants checks the rules over the module's own source, and that
// every allowlisted place still exists (an allowlist only shrinks).
func TestInvariants(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not %s: %v", root, err)
	}
	problems, used := checkInvariants(t, root)
	for key := range nameCallsAllowed {
		if !used["name "+key] {
			problems = append(problems, "invariants_test.go: nameCallsAllowed lists "+strconv.Quote(key)+", which no longer occurs: remove it")
		}
	}
	for key := range panicsAllowed {
		if !used["panic "+key] {
			problems = append(problems, "invariants_test.go: panicsAllowed lists "+strconv.Quote(key)+", which no longer occurs: remove it")
		}
	}
	for _, dir := range daemonSubpackages {
		if !used["dir "+dir] {
			problems = append(problems, "invariants_test.go: daemonSubpackages lists "+dir+", which the check did not parse: walk it, or remove it")
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestInvariantsCatchBreaks runs the check over a tree of small files
// that break each rule (and some that only look as if they did), so that
// a change to the check that stops it finding them fails here.
func TestInvariantsCatchBreaks(t *testing.T) {
	root := t.TempDir()
	for name, src := range map[string]string{
		"fusefs/bad.go": `package fusefs
import ("os"; "golang.org/x/sys/unix"; sys "syscall")
func bad(dir int) {
	unix.Fstatat(dir, "x", nil, 0)
	open := os.Open
	sys.Open("x", 0, 0)
	_ = open
	panic("x")
}
func (n *Node) remove() { os.Remove("x") }
`,
		"fusefs/audit/audit.go": `package audit
import "os"
func readProgram() { os.ReadFile("/proc/1/comm") }
func elsewhere()   { os.ReadFile("x") }
`,
		"fusefs/sub/sub.go": `package sub
import "os"
func readProgram() { os.Stat("x") }
`,
		"fusefs/dirfd/dirfd.go": `package dirfd
import "golang.org/x/sys/unix"
func Open(dir int) { unix.Openat(dir, "x", 0, 0) }
`,
		"fusefs/shadow.go": `package fusefs
type fakeOS struct{}
func (fakeOS) Open(string) {}
func shadowed(os fakeOS) {
	os.Open("x")
	panic := func(string) {}
	panic("x")
}
`,
		"fusefs/proto.go":              "package fusefs\nimport \"" + protocolPkg + "\"\nvar _ writeproto.Write\n",
		"fusefs/writeengine/engine.go": "package writeengine\nimport \"" + protocolPkg + "\"\nvar _ writeproto.Write\n",
		"locks/locks.go":               "package locks\nfunc never() { panic(\"unreachable\") }\n",
		"cmd/realmfs/main.go":          "package main\nfunc main() { panic(1) }\n",
		"policy/ok.go":                 "package policy\nimport \"os\"\nfunc ok() { os.Open(\"x\") }\n",
		"errcode/errcode.go":           "package errcode\n",
		"procinfo/procinfo.go":         "package procinfo\n",
		"locks/mu.go":                  "package locks\nimport (\"sync\"; s2 \"sync\")\ntype t struct{ a sync.Mutex; b s2.RWMutex; c sync.WaitGroup }\n",
	} {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	problems, _ := checkInvariants(t, root)
	var got []string
	for _, p := range problems {
		got = append(got, p[:strings.Index(p, " (rule: ")])
	}
	want := []string{
		"cmd/realmfs/main.go:2: naked panic in main",
		"fusefs/audit/audit.go:4: os.ReadFile in elsewhere",
		"fusefs/bad.go:10: os.Remove in (*Node).remove",
		"fusefs/bad.go:4: unix.Fstatat in bad",
		"fusefs/bad.go:5: os.Open in bad",
		"fusefs/bad.go:6: sys.Open in bad",
		"fusefs/bad.go:8: naked panic in bad",
		"fusefs/proto.go:2: imports fusefs/writeproto",
		"fusefs/sub/sub.go:3: os.Stat in readProgram",
		"locks/locks.go:2: naked panic in never",
		"locks/mu.go:3: s2.RWMutex",
		"locks/mu.go:3: sync.Mutex",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the check found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// protocolPkg is the write protocol's import path (the driver rule).
const protocolPkg = "github.com/realm-dev/realm/fusefs/writeproto"

// checkInvariants returns, sorted, each place beneath root that breaks a
// rule, and the keys of the allowlists that places matched (and "dir D"
// for each directory D whose files it parsed).
func checkInvariants(t *testing.T, root string) (problems []string, used map[string]bool) {
	t.Helper()
	used = map[string]bool{}
	for _, dir := range panicDirs {
		walkSource(t, filepath.Join(root, dir), func(path string, fset *token.FileSet, f *ast.File) {
			rel, _ := filepath.Rel(root, path)
			used["dir "+filepath.ToSlash(filepath.Dir(rel))] = true
			problems = append(problems, checkFile(filepath.ToSlash(rel), fset, f, used)...)
		})
	}
	sort.Strings(problems)
	return problems, used
}

// checkFile returns the places in f, at rel from the module root, that
// break a rule, and marks in used the allowlist keys that places matched.
func checkFile(rel string, fset *token.FileSet, f *ast.File, used map[string]bool) []string {
	var problems []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path == protocolPkg && !strings.HasPrefix(rel, "fusefs/writeengine/") && !strings.HasPrefix(rel, "fusefs/writeproto/") {
			problems = append(problems, fmt.Sprintf("%s:%d: imports fusefs/writeproto", rel, fset.Position(imp.Pos()).Line)+
				" (rule: only the write engine, fusefs/writeengine, drives the write protocol; call the engine)")
		}
	}
	if strings.HasPrefix(rel, "fusefs/") || strings.HasPrefix(rel, "locks/") || strings.HasPrefix(rel, "procinfo/") {
		problems = append(problems, unclassedMutexes(rel, fset, f)...)
	}
	checkNames := strings.HasPrefix(rel, "fusefs/") && !strings.HasPrefix(rel, "fusefs/dirfd/")
	eachCall(f, func(fn string, call *ast.CallExpr) {
		where := fmt.Sprintf("%s:%d", rel, fset.Position(call.Pos()).Line)
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" && id.Obj == nil {
			key := rel + " " + fn
			if _, ok := panicsAllowed[key]; ok {
				used["panic "+key] = true
			} else {
				problems = append(problems, where+": naked panic in "+fn+
					" (rule: no panic in the daemon; return an error, or list a documented unreachable case in panicsAllowed)")
			}
		}
		name := ""
		if checkNames {
			name = nameCall(f, call)
		}
		if name == "" {
			return
		}
		key := strings.TrimPrefix(rel, "fusefs/") + " " + fn + " " + name
		if _, ok := nameCallsAllowed[key]; ok {
			used["name "+key] = true
		} else {
			problems = append(problems, where+": "+name+" in "+fn+
				" (rule: name-based system calls on BACKING only in fusefs/dirfd; a call on a file outside BACKING goes in nameCallsAllowed, with why)")
		}
	})
	return problems
}

// unclassedMutexes returns the places in f that name sync.Mutex or
// sync.RWMutex: every mutex of fusefs (and beneath), locks and procinfo is a lockorder.Mutex or RWMutex
// of a class in internal/lockorder's tree, which a lockdep build checks.
func unclassedMutexes(rel string, fset *token.FileSet, f *ast.File) []string {
	syncNames := map[string]bool{}
	for _, imp := range f.Imports {
		if imp.Path.Value == `"sync"` {
			name := "sync"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			syncNames[name] = true
		}
	}
	if len(syncNames) == 0 {
		return nil
	}
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && syncNames[id.Name] && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex") {
			problems = append(problems, fmt.Sprintf("%s:%d: %s.%s", rel, fset.Position(sel.Pos()).Line, id.Name, sel.Sel.Name)+
				" (rule: every mutex of the daemon is a lockorder.Mutex or RWMutex of a class in internal/lockorder/order.go)")
		}
		return true
	})
	return problems
}

// walkSource parses each non-test Go file beneath dir and hands it to fn.
func walkSource(t *testing.T, dir string, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(path, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eachCall calls fn with every call in f and the name of the top-level
// function it is in ("(*T).m" for a method, "" outside any function), and
// with every function of a name-call package referred to without a call
// (f := os.Open), as a call of it.
func eachCall(f *ast.File, fn func(funcName string, call *ast.CallExpr)) {
	for _, d := range f.Decls {
		name := ""
		if fd, ok := d.(*ast.FuncDecl); ok {
			name = funcName(fd)
		}
		called := map[ast.Expr]bool{}
		ast.Inspect(d, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				called[n.Fun] = true
				fn(name, n)
			case *ast.SelectorExpr:
				if !called[n] {
					fn(name, &ast.CallExpr{Fun: n, Lparen: n.Pos()})
				}
			}
			return true
		})
	}
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		star, typ = "*", s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}

// nameCall returns "pkg.Func" if call's function is one of nameCallFuncs,
// the package named as f imports it, else "".
func nameCall(f *ast.File, call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Obj != nil { // a local variable, not a package
		return ""
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local != id.Name {
			continue
		}
		for _, name := range nameCallFuncs[path] {
			if name == sel.Sel.Name {
				return local + "." + name
			}
		}
	}
	return ""
}
