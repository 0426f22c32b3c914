package fusefs

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/realm-dev/realm/policy"
)

// relPathTree builds, without a mount, the directory chain root/names[0]/...
// on a bare go-fuse bridge, and returns the deepest node.
func relPathTree(t testing.TB, names []string) *Node {
	f := &FS{}
	f.root = &Node{fsys: f}
	fs.NewNodeFS(f.root, &fs.Options{}) // attaches f.root to a bridge
	ctx := context.Background()
	cur := f.root
	for i, name := range names {
		child := &Node{fsys: f}
		in := cur.NewPersistentInode(ctx, child, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: uint64(i + 2)})
		if !cur.AddChild(name, in, false) {
			t.Fatalf("AddChild(%q) failed", name)
		}
		cur = child
	}
	return cur
}

// TestRelPath: the path (Node.Rel) the guard matches is the node's place in
// the tree, joined from the root down.
func TestRelPath(t *testing.T) {
	tests := []struct {
		dirs []string
		name string
		want string
	}{
		{nil, "", ""},
		{nil, "f", "f"},
		{[]string{"a"}, "", "a"},
		{[]string{"a"}, "f", "a/f"},
		{[]string{"src", "net", "http"}, "server.go", "src/net/http/server.go"},
		{[]string{".ssh"}, "id_rsa", ".ssh/id_rsa"},
		{strings.Split("1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18", "/"), "f", "1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/f"},
	}
	for _, tt := range tests {
		dir := relPathTree(t, tt.dirs)
		if got := dir.Rel(tt.name); got != tt.want {
			t.Errorf("Rel(%v, %q) = %q, want %q", tt.dirs, tt.name, got, tt.want)
		}
	}
}

// BenchmarkLookupGuard is the guard's own work in the lookup of a regular
// file: the workspace path from the node tree and the built-in credential
// set's verdict on it. docs/PERFORMANCE.md sets it against a lookup's round
// trip through the kernel.
func BenchmarkLookupGuard(b *testing.B) {
	dir := relPathTree(b, []string{"src", "net", "http", "internal"})
	m := policy.Default().Matcher()
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			_ = dir.Rel("server.go")
		}
	})
	b.Run("path+match", func(b *testing.B) {
		for b.Loop() {
			if m.Denied(dir.Rel("server.go")) {
				b.Fatal("server.go denied")
			}
		}
	})
}
