package inodes

import (
	"sync"
	"testing"
	"time"

	"github.com/realm-dev/realm/locks"
)

// node stands for the adapter's node: the table only compares and keeps it.
type node struct {
	name string
	ino  uint64
}

func file(ino, gen uint64) FileID { return FileID{Key: locks.Key{Dev: 1, Ino: ino}, Gen: gen} }

// TestRekeyed: a rekeyed node is found by its new identity only, its
// number is borrowed until it is forgotten, and it keeps one entry
// however often it is rekeyed.
func TestRekeyed(t *testing.T) {
	var tb Table[*node]
	n := &node{"f", 10}
	tb.Rekeyed(file(11, 1), n, n.ino)
	tb.Rekeyed(file(12, 1), n, n.ino)
	tests := []struct {
		id   FileID
		want *node
	}{
		{file(11, 1), nil}, // an earlier version: lookups no longer lead to n
		{file(12, 1), n},
		{file(12, 2), nil}, // the number, given to another file
		{file(10, 1), nil},
	}
	for _, tt := range tests {
		if got, ok := tb.Node(tt.id); got != tt.want || ok != (tt.want != nil) {
			t.Errorf("Node(%v) = %v, %v; want %v", tt.id, got, ok, tt.want)
		}
	}
	if objects, nodes := tb.Entries(); objects != 1 || nodes != 1 {
		t.Errorf("entries %d, %d; want 1, 1", objects, nodes)
	}
	if !tb.Borrowed(10) || tb.Borrowed(12) {
		t.Errorf("borrowed: 10 %v, 12 %v; want only the node's number", tb.Borrowed(10), tb.Borrowed(12))
	}
	tb.Forget(n, n.ino)
	if objects, nodes := tb.Entries(); objects+nodes != 0 || tb.Borrowed(10) {
		t.Errorf("after forget: entries %d, %d, borrowed %v", objects, nodes, tb.Borrowed(10))
	}
}

// TestMadeUp: an object whose number a live node borrows gets a made-up
// number, the same for every lookup racing or later; one whose number is
// free gets none.
func TestMadeUp(t *testing.T) {
	var tb Table[*node]
	holder := &node{"old", 20}
	tb.Rekeyed(file(21, 1), holder, holder.ino)
	made := 0
	mk := func(ino uint64) (*node, uint64) {
		made++
		return &node{"new", ino}, ino
	}
	if m, ok := tb.MadeUp(file(30, 1), 30, mk); ok || m != nil {
		t.Errorf("a free number: %v, %v; want none made up", m, ok)
	}
	const lookups = 8
	got := make([]*node, lookups)
	var wg sync.WaitGroup
	for i := range lookups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = tb.MadeUp(file(20, 5), 20, mk)
		}()
	}
	wg.Wait()
	if made != 1 || got[0] == nil || got[0].ino&BorrowedBit == 0 {
		t.Fatalf("made %d nodes, the first %v; want one with a made-up number", made, got[0])
	}
	for i, m := range got {
		if m != got[0] {
			t.Errorf("lookup %d answered %v, the first %v", i, m, got[0])
		}
	}
	if !tb.Borrowed(got[0].ino) {
		t.Error("the made-up number is not kept")
	}
	tb.Forget(got[0], got[0].ino)
	if again, _ := tb.MadeUp(file(20, 5), 20, mk); again == got[0] || made != 2 {
		t.Errorf("once forgotten, the object kept its node (%d made)", made)
	}
	none := func(uint64) (*node, uint64) { return nil, 0 }
	if m, ok := tb.MadeUp(file(20, 6), 20, none); m != nil || !ok {
		t.Errorf("an adapter that made no node of its own: %v, %v", m, ok)
	}
}

// TestCatchUp: a node made for a file that commits replaced catches up
// with the file now, through a chain of commits, but not with another
// file given the same number.
func TestCatchUp(t *testing.T) {
	tests := []struct {
		name   string
		chain  []FileID // commits, each replacing the one before
		now    FileID
		caught bool
	}{
		{"one commit", []FileID{file(1, 1), file(2, 1)}, file(2, 1), true},
		{"three commits", []FileID{file(1, 1), file(2, 1), file(3, 1), file(4, 1)}, file(4, 1), true},
		{"the number reused", []FileID{file(1, 1), file(2, 1)}, file(2, 2), false},
		{"no commit", nil, file(2, 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tb Table[*node]
			for i := 1; i < len(tt.chain); i++ {
				tb.Succeeded(tt.chain[i-1], tt.chain[i])
			}
			n := &node{"f", 1}
			if got := tb.CatchUp(n, n.ino, file(1, 1), tt.now); got != tt.caught {
				t.Fatalf("CatchUp = %v, want %v", got, tt.caught)
			}
			m, _ := tb.Node(tt.now)
			if tt.caught != (m == n) || tt.caught != tb.Borrowed(1) {
				t.Errorf("node of the file now %v, number borrowed %v", m, tb.Borrowed(1))
			}
		})
	}
}

// TestRetired: a retired node leaves the table, its number is borrowed,
// and the next node of its file holds readers off for the hold given.
func TestRetired(t *testing.T) {
	var tb Table[*node]
	n := &node{"f", 40}
	key := locks.Key{Dev: 1, Ino: 40}
	tb.Rekeyed(file(40, 1), n, n.ino)
	before := time.Now()
	tb.Retired(n, n.ino, key, time.Second)
	if m, ok := tb.Node(file(40, 1)); ok {
		t.Errorf("a lookup still leads to the retired node %v", m)
	}
	if !tb.Borrowed(40) {
		t.Error("the retired node's number is not borrowed")
	}
	if hold := tb.HoldOf(key); hold < before.Add(time.Second).UnixNano() {
		t.Errorf("hold until %v, want a second on", time.Unix(0, hold))
	}
	if hold := tb.HoldOf(locks.Key{Dev: 1, Ino: 41}); hold != 0 {
		t.Errorf("another file held until %d", hold)
	}
	tb.Retired(&node{"g", 42}, 42, locks.Key{Dev: 1, Ino: 42}, -time.Second)
	tb.Retired(&node{"h", 43}, 43, locks.Key{Dev: 1, Ino: 43}, 0)
	if hold := tb.HoldOf(locks.Key{Dev: 1, Ino: 42}); hold != 0 {
		t.Errorf("a hold past is kept until %d", hold)
	}
}

// TestNumber: an object on the root's device keeps its number; one on
// another device gets a number mixed with both devices, which differs
// from its own and from the same number on a third device.
func TestNumber(t *testing.T) {
	const root, other, third = 0x801, 0x2a, 0x2b
	if got := Number(root, root, 7); got != 7 {
		t.Errorf("Number on the root's device = %d, want 7", got)
	}
	a, b := Number(root, other, 7), Number(root, third, 7)
	if a == 7 || b == 7 || a == b {
		t.Errorf("Number on other devices = %#x, %#x: want two numbers of their own", a, b)
	}
	if want := uint64(other<<32^root<<32) ^ 7; a != want {
		t.Errorf("Number(%#x, %#x, 7) = %#x, want %#x", root, other, a, want)
	}
}
