package lockorder

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
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

// TestDocDrawsTheTable: the package doc's drawing of the tree is the
// table's, row for row, so that the two never say different things.
func TestDocDrawsTheTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "order.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	drawn := drawing(f.Doc.Text())
	table := tableOf(f)
	if len(table) < 20 {
		t.Fatalf("found %d rows of the table: the test reads it wrong", len(table))
	}
	if !maps.Equal(drawn, table) {
		t.Errorf("the drawing (class: the class above it)\n%v\nis not the table\n%v", drawn, table)
	}
}

// drawing reads the tree drawn in doc: each class's name, and the name of
// the class above it ("" for the root).
func drawing(doc string) map[string]string {
	tree := make(map[string]string)
	var path []string // the last row drawn at each depth
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "\t") {
			continue
		}
		runes := []rune(line[1:])
		i := 0
		for i < len(runes) && strings.ContainsRune("│├└─ ", runes[i]) {
			i++
		}
		depth := i / 3
		if i == len(runes) || depth > len(path) {
			continue
		}
		name := strings.Fields(string(runes[i:]))[0]
		path = append(path[:depth], name)
		tree[name] = ""
		if depth > 0 {
			tree[name] = path[depth-1]
		}
	}
	return tree
}

// tableOf reads the class literals of f: each one's name and the name of
// the class it is under.
func tableOf(f *ast.File) map[string]string {
	byVar := make(map[string]string) // variable: class name
	under := make(map[string]string) // variable: the variable it is under
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, v := range spec.Values {
			lit, ok := v.(*ast.CompositeLit)
			if !ok || !isIdent(lit.Type, "class") {
				continue
			}
			for _, e := range lit.Elts {
				kv := e.(*ast.KeyValueExpr)
				switch key := kv.Key.(*ast.Ident).Name; {
				case key == "name":
					byVar[spec.Names[i].Name], _ = strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
				case key == "under":
					under[spec.Names[i].Name] = kv.Value.(*ast.UnaryExpr).X.(*ast.Ident).Name
				}
			}
		}
		return true
	})
	table := make(map[string]string)
	for v, name := range byVar {
		table[name] = byVar[under[v]]
	}
	return table
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
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
				rw.RLock()
				m.Lock()
				n++
				m.Unlock()
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
