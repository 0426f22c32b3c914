package makers

import (
	"strconv"
	"testing"
)

func owner(i int) Owner { return Owner{Name: "pid:" + strconv.Itoa(i), Start: "1"} }

// TestMadeBy: an object is made by its maker only, in the maker's
// incarnation; a forgotten one is no one's.
func TestMadeBy(t *testing.T) {
	tb := New[int](10, 10)
	tb.Made(1, Owner{"session:1", "1"})
	for _, tc := range []struct {
		name     string
		k        int
		o        Owner
		made, by bool
	}{
		{"its maker", 1, Owner{"session:1", "1"}, true, true},
		{"another owner", 1, Owner{"session:2", "1"}, true, false},
		{"its maker's later incarnation", 1, Owner{"session:1", "2"}, true, false},
		{"an object nobody made", 2, Owner{"session:1", "1"}, false, false},
	} {
		if made, by := tb.MadeBy(tc.k, tc.o); made != tc.made || by != tc.by {
			t.Errorf("%s: MadeBy = %v, %v; want %v, %v", tc.name, made, by, tc.made, tc.by)
		}
	}
	tb.Forget(1)
	if made, _ := tb.MadeBy(1, Owner{"session:1", "1"}); made {
		t.Error("a forgotten object is still in the table")
	}
}

// TestObjectsBounded: past maxObjects one object is forgotten per object
// made; the one made stays.
func TestObjectsBounded(t *testing.T) {
	tb := New[int](100, 10)
	for i := range 150 {
		tb.Made(i, owner(0))
		if _, by := tb.MadeBy(i, owner(0)); !by {
			t.Fatalf("object %d, just made, is not its maker's", i)
		}
	}
	if tb.Len() != 100 {
		t.Errorf("Len = %d after 150 made, want the bound, 100", tb.Len())
	}
	tb.Made(149, owner(1)) // made again: no other forgotten
	if tb.Len() != 100 {
		t.Errorf("Len = %d after an object made again, want 100", tb.Len())
	}
}

// TestOwnersBounded: past maxOwners every object is forgotten, and no
// number given again leads a new owner to a forgotten owner's object.
func TestOwnersBounded(t *testing.T) {
	const maxOwners = 64
	tb := New[int](1000, maxOwners)
	for i := range maxOwners {
		tb.Made(i, owner(i))
	}
	if _, by := tb.MadeBy(0, owner(0)); !by || tb.Len() != maxOwners {
		t.Fatalf("within the bound: %d objects, want %d, each its maker's", tb.Len(), maxOwners)
	}
	tb.Made(maxOwners, owner(maxOwners)) // numbered 1 now, as owner(0) was
	if tb.Len() != 1 {
		t.Fatalf("past the bound: %d objects, want 1 (the rest forgotten)", tb.Len())
	}
	if _, by := tb.MadeBy(maxOwners, owner(maxOwners)); !by {
		t.Error("the object made past the bound is not its maker's")
	}
	if made, _ := tb.MadeBy(1, owner(1)); made {
		t.Error("a forgotten owner's object is still in the table")
	}
	tb.Made(0, owner(maxOwners)) // object 0 again, by the new number 1
	if _, by := tb.MadeBy(0, owner(0)); by {
		t.Error("a forgotten owner is taken for the owner given its old number")
	}
}
