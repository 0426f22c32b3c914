package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackingOpenedOnce: the daemon opens BACKING by its path once (run),
// and the mount (fusefs.NewAt), its journal (openJournal) and the control
// socket's undo (startControl) work beneath that descriptor. Each opened
// BACKING by path for itself once: a host process that renamed BACKING
// and put another directory at its path between two of them had undo,
// run through the mountpoint, restore a removed file into that directory,
// outside BACKING. Any call that resolves cfg.backing's path again fails
// this test.
func TestBackingOpenedOnce(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var opens []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := fn.X.(*ast.Ident)
			if !ok || (pkg.Name != "dirfd" && pkg.Name != "fusefs") || (fn.Sel.Name != "OpenRoot" && fn.Sel.Name != "New") {
				return true
			}
			if arg, ok := call.Args[0].(*ast.SelectorExpr); ok && arg.Sel.Name == "backing" {
				opens = append(opens, fset.Position(call.Pos()).String()+": "+pkg.Name+"."+fn.Sel.Name)
			}
			return true
		})
	}
	if len(opens) != 1 {
		t.Errorf("BACKING's path is opened %d times, want once (run), every other part beneath that fd:\n%s", len(opens), strings.Join(opens, "\n"))
	}
}
