package lockorder

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestNoExtraFields: a Mutex is a sync.Mutex in size, in every build.
func TestNoExtraFields(t *testing.T) {
	if a, b := unsafe.Sizeof(Mutex[NodeMu]{}), unsafe.Sizeof(sync.Mutex{}); a != b {
		t.Errorf("Mutex is %d bytes, sync.Mutex %d", a, b)
	}
	if a, b := unsafe.Sizeof(RWMutex[NsMu]{}), unsafe.Sizeof(sync.RWMutex{}); a != b {
		t.Errorf("RWMutex is %d bytes, sync.RWMutex %d", a, b)
	}
}

// TestDocDrawsTheTable: the package doc's drawing of the order is the
// table's, row for row, so that the two never say different things.
func TestDocDrawsTheTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "order.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	_, leavesPara, _ := strings.Cut(doc, "Leaves: ")
	leavesPara, _, _ = strings.Cut(leavesPara, "\n\n")
	docLeaves := strings.Split(strings.TrimSuffix(strings.Join(strings.Fields(leavesPara), " "), "."), ", ")
	var leaves []string
	rows := 0
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isIdent(lit.Type, "class") {
			return true
		}
		rows++
		name, rank := fieldOf(lit, "name"), fieldOf(lit, "rank")
		name, _ = strconv.Unquote(name)
		if rank == "leaf" {
			leaves = append(leaves, name)
			return true
		}
		line := regexp.MustCompile(`(?m)^\s*[─│└ ]*` + regexp.QuoteMeta(name) + `\s+` + rank + `\s`)
		if !line.MatchString(doc) {
			t.Errorf("the drawing has no row %q of rank %s", name, rank)
		}
		return true
	})
	slices.Sort(leaves)
	slices.Sort(docLeaves)
	if !slices.Equal(leaves, docLeaves) {
		t.Errorf("the doc's leaves %q, the table's %q", docLeaves, leaves)
	}
	if rows < 20 {
		t.Errorf("found %d rows of the table: the test reads it wrong", rows)
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// fieldOf is the source of a keyed field's value in lit, "" if absent.
func fieldOf(lit *ast.CompositeLit, key string) string {
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok || !isIdent(kv.Key, key) {
			continue
		}
		switch v := kv.Value.(type) {
		case *ast.BasicLit:
			return v.Value
		case *ast.Ident:
			return v.Name
		}
	}
	return ""
}

// TestAMutex: the types lock as sync's do.
func TestAMutex(t *testing.T) {
	var m Mutex[NodeMu]
	var rw RWMutex[NsMu]
	n := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				m.Lock()
				n++
				m.Unlock()
				rw.RLock()
				rw.RUnlock()
			}
		})
	}
	wg.Wait()
	if n != 8000 {
		t.Fatalf("n = %d", n)
	}
	if !m.TryLock() || m.TryLock() {
		t.Fatal("TryLock")
	}
	m.Unlock()
	rw.Lock()
	if rw.TryRLock() {
		t.Fatal("TryRLock under Lock")
	}
	rw.Unlock()
}
