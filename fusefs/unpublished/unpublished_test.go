package unpublished

import (
	"context"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/locks"
)

func TestTable(t *testing.T) {
	var tb Table[int]
	d1, d2 := locks.Key{Dev: 1, Ino: 10}, locks.Key{Dev: 1, Ino: 20}
	if !tb.Empty() {
		t.Fatal("a zero table is not empty")
	}
	tb.Add(Name{d1, "a"}, Entry[int]{Node: 1, Key: locks.Key{Dev: 1, Ino: 100}, Owner: "o"})
	tb.Add(Name{d1, "b"}, Entry[int]{Node: 2})
	tb.Add(Name{d2, "a"}, Entry[int]{Node: 3})
	if e, ok := tb.Named(Name{d1, "a"}); !ok || e.Node != 1 || e.Owner != "o" {
		t.Errorf("Named(d1, a) = %v, %v", e, ok)
	}
	if _, ok := tb.Named(Name{d2, "b"}); ok {
		t.Error("Named(d2, b) found a file never added")
	}
	if e, ok := tb.Of(3); !ok || e.Node != 3 {
		t.Errorf("Of(3) = %v, %v", e, ok)
	}
	if got := len(tb.In(d1, false)); got != 2 {
		t.Errorf("In(d1) lists %d, want 2", got)
	}
	if got := len(tb.In(d2, true)); got != 3 {
		t.Errorf("In(all) lists %d, want 3", got)
	}
	// A name added again (the first one gone meanwhile) leads to the new node.
	tb.Add(Name{d1, "a"}, Entry[int]{Node: 4})
	if _, ok := tb.Of(1); ok {
		t.Error("the replaced entry's node is still unpublished")
	}
	for _, n := range []int{2, 3, 4, 4, 99} {
		tb.Remove(n)
	}
	if !tb.Empty() {
		t.Errorf("the table is not empty after every node's removal: %d left", tb.n.Load())
	}
}

// TestContacts: each contact makes real the files it reaches, and stops
// at the first refusal.
func TestContacts(t *testing.T) {
	var tb Table[int]
	d1, d2 := locks.Key{Ino: 1}, locks.Key{Ino: 2}
	tb.Add(Name{d1, "a"}, Entry[int]{Node: 1})
	tb.Add(Name{d1, "b"}, Entry[int]{Node: 2})
	tb.Add(Name{d2, "a"}, Entry[int]{Node: 3})
	var made []int
	real := func(_ context.Context, e Entry[int]) syscall.Errno {
		made = append(made, e.Node)
		return 0
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		contact func() syscall.Errno
		want    int // files made real
	}{
		{"its node", func() syscall.Errno { return tb.ContactNode(ctx, 3, real) }, 1},
		{"another node", func() syscall.Errno { return tb.ContactNode(ctx, 9, real) }, 0},
		{"its name", func() syscall.Errno { return tb.ContactName(ctx, Name{d2, "a"}, real) }, 1},
		{"its directory", func() syscall.Errno { return tb.ContactDir(ctx, d1, real) }, 2},
		{"those a test picks", func() syscall.Errno { return tb.ContactWhere(ctx, func(n int) bool { return n != 2 }, real) }, 2},
		{"none picked", func() syscall.Errno { return tb.ContactWhere(ctx, func(int) bool { return false }, real) }, 0},
	} {
		made = nil
		if errno := tc.contact(); errno != 0 || len(made) != tc.want {
			t.Errorf("%s: %v, made real %v; want %d", tc.name, errno, made, tc.want)
		}
	}
	refuse := func(context.Context, Entry[int]) syscall.Errno { made = append(made, 0); return syscall.EACCES }
	made = nil
	if errno := tb.ContactWhere(ctx, func(int) bool { return true }, refuse); errno != syscall.EACCES || len(made) != 1 {
		t.Errorf("a refusal: %v after %d tries; want EACCES after 1", errno, len(made))
	}
}
