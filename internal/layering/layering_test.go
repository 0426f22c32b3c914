package layering

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/realm-dev/realm/"

// layers places every package of the module: a package imports only
// packages of a higher layer number (further down). A new package fails
// the test until it is placed here.
var layers = map[string]int{
	// Programs and tests: wiring.
	"cmd/realmfs": 0, "cmd/realmctl": 0, "cmd/realm-csi": 0, "e2e": 0,
	"internal/benchtool": 0, "internal/fakeopenshell": 0,
	// realmctl's services.
	"interceptor": 1, "reaper": 1, "sandbox": 1,
	// The CSI plugin: it checks policies and runs realmfs, never the FUSE
	// layer itself (a mount must outlive the plugin's process).
	"csidriver": 1,
	// The go-fuse adapters: decode a request, call one thing, answer
	// (one layer with realmctl's services and the CSI plugin, which
	// import none of it).
	"fusefs": 1,
	// A name's change once an adapter has prepared its directory: the op's
	// own checks, its journal record, its one dirfd call, what it made or
	// moved recorded; it calls what the adapters call.
	"fusefs/nameops": 2,
	// What the adapters call: the write engine, the audited admission and
	// the mount's services.
	"fusefs/writeengine": 3, "fusefs/admit": 3, "fusefs/dircache": 3,
	"fusefs/kernelnotify": 3, "fusefs/readhold": 3,
	"fusefs/watch": 3, "fusefs/reclock": 3, "fusefs/inodes": 3,
	"fusefs/nodeopens": 3, "fusefs/kernelcheck": 3,
	"fusefs/kernelcache":  3, // what the kernel may keep, and the capabilities asked at mount
	"fusefs/unpublished":  3, // the created files whose names are not in BACKING yet
	"fusefs/setattr":      3, // a SETATTR's mode, owner and times applied to an fd
	"fusefs/journaling":   3, // the journal's producers: the records the adapters' ops append
	"fusefs/journal/undo": 3, // an owner's changes put back, from the journal's records
	"fusefs/journal/diff": 3, // a window's diff, from the journal's records
	// The guard's decisions, which the adapters, the admission and the
	// engine ask (new content never keeps a set-ID bit:
	// guard.HostFileMode); what the admission writes to and charges (the
	// audit log, the descriptor counts, the callers' umasks); the journal
	// of changes' store, which the engine's commit and the name ops append
	// to.
	"fusefs/guard": 4, "fusefs/audit": 4, "fusefs/fdbudget": 4, "fusefs/requestnotes": 4, "fusefs/callers": 4,
	"fusefs/diskroom": 4, // the room a write may take: root's reserve stays the host's
	"fusefs/journal":  4,
	"fusefs/templive": 4, // which daemon's temps are alive: the sweep asks, the engine names its temps by it
	// The protocol, the policy, /proc.
	"fusefs/writeproto": 5, "policy": 5, "procinfo": 5,
	"fusefs/journal/keptname":  5, // the names of kept/'s entries, pure: the journal's and its readers
	"fusefs/journal/moved":     5, // an open intent's names carried through the renames after it, pure: recovery
	"fusefs/journal/carry":     5, // the intents not yet on the device, in an attribute jbd2 orders
	"fusefs/journal/rootbind":  5, // a journal outside BACKING bound to the BACKING it records
	"fusefs/journal/ownerarg":  5, // --owner OWNER@INCARNATION, as the commands and undo read it
	"fusefs/journal/makers":    5, // the fresh objects' makers: bounded, no pointer per object
	"fusefs/journal/seqtable":  5, // values by change seq in chunks of consecutive seqs, pure: kept/'s tables
	"fusefs/journal/jdir":      5, // the journal's directory opened: its modes, owner, filesystem, LOCK
	"fusefs/journal/segfile":   5, // a log segment's file: its blocks preallocated, a torn tail zeroed
	"fusefs/journal/bounds":    5, // what the journal may hold, and its slack while a prune waits, pure
	"fusefs/journal/keptlinks": 5, // kept/'s links to an object, by identity, for its st_nlink: pure
	"fusefs/journal/jsontime":  5, // a record's times written as encoding/json writes them, pure
	"fusefs/journal/logsync":   5, // the system calls that make the log and kept/ durable, and which intents are written through
	// The lock table (procinfo names its owners); the one syscall layer
	// on BACKING.
	"locks": 6, "fusefs/dirfd": 6,
	// Leaves.
	"errcode": 7, "sandbox/label": 7, "internal/lockorder": 7,
	"internal/devthread": 7, "internal/capdrop": 7, "internal/mountwatch": 7, "internal/adaptprocs": 7, "internal/gcroom": 7, "internal/sysfail": 7, "internal/profiling": 7, "internal/ratelog": 7, "internal/layering": 7, "internal/testseed": 7,
	"internal/rundir": 7, // where a daemon and the commands that ask it meet: control socket, mount record
}

// pkg is one package of the module as go list sees it.
type pkg struct {
	path    string   // relative to the module
	imports []string // the module's packages it imports, relative
	files   int      // non-test Go files
	lines   int      // their lines
}

var update = flag.Bool("update", false, "rewrite docs/ARCHITECTURE.md's import graph")

func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		l, ok := layers[p.path]
		if !ok {
			t.Errorf("%s: not placed in a layer (internal/layering: layers)", p.path)
			continue
		}
		for _, imp := range p.imports {
			if li, ok := layers[imp]; ok && li <= l {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only layers below its own", p.path, l, imp, li)
			}
		}
	}
}

// TestArchitectureGraph keeps the import graph in docs/ARCHITECTURE.md the
// compiler's (its layers and imports; the files and lines columns may lag
// behind an edit): go test ./internal/layering -update rewrites it.
func TestArchitectureGraph(t *testing.T) {
	doc := filepath.Join("..", "..", "docs", "ARCHITECTURE.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- import graph: begin -->\n", "<!-- import graph: end -->\n"
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s: no %q … %q block", doc, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	want := graphTable(listPackages(t))
	got := string(b[i+len(begin) : j])
	if got == want || !*update && graphOnly(got) == graphOnly(want) {
		return // the counts may lag; -update refreshes them
	}
	if *update {
		out := append(append(append([]byte{}, b[:i+len(begin)]...), want...), b[j:]...)
		if err := os.WriteFile(doc, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the import graph is not the compiler's; go test ./internal/layering -update rewrites it. want:\n%s", doc, want)
}

// graphOnly is a graph table without its files and lines columns: what
// the compiler decides, which the document must say exactly.
func graphOnly(table string) string {
	var out []string
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) == 7 {
			cells[3], cells[4] = "", ""
		}
		out = append(out, strings.Join(cells, "|"))
	}
	return strings.Join(out, "\n")
}

// graphTable is the import graph as a table, by layer, then path.
func graphTable(pkgs []pkg) string {
	sort.Slice(pkgs, func(a, b int) bool {
		la, lb := layers[pkgs[a].path], layers[pkgs[b].path]
		if la != lb {
			return la < lb
		}
		return pkgs[a].path < pkgs[b].path
	})
	var s strings.Builder
	s.WriteString("| layer | package | files | lines | imports of realm's |\n|---:|---|---:|---:|---|\n")
	for _, p := range pkgs {
		imps := "–"
		if len(p.imports) > 0 {
			imps = "`" + strings.Join(p.imports, "`, `") + "`"
		}
		fmt.Fprintf(&s, "| %d | `%s` | %d | %d | %s |\n", layers[p.path], p.path, p.files, p.lines, imps)
	}
	return s.String()
}

// listPackages asks go list for the module's packages, their imports of
// the module's packages and their non-test files (under any build tag).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \" \"}}\t{{join .GoFiles \" \"}} {{join .IgnoredGoFiles \" \"}}", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list: %q", sc.Text())
		}
		p := pkg{path: strings.TrimPrefix(f[0], module)}
		for _, imp := range strings.Fields(f[2]) {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				p.imports = append(p.imports, rel)
			}
		}
		for _, name := range strings.Fields(f[3]) {
			if strings.HasSuffix(name, "_test.go") {
				continue // IgnoredGoFiles: the files a build tag leaves out, counted whatever the tags
			}
			b, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			p.files++
			p.lines += bytes.Count(b, []byte("\n"))
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
