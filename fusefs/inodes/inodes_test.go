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
// number is borrowed (while it lives, and kept for its object once it is
// forgotten), and it keeps one entry however often it is rekeyed.
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
	if objects, nodes := tb.Entries(); objects+nodes != 0 || !tb.Borrowed(10) || tb.Kept() != 1 {
		t.Errorf("after forget: entries %d, %d, borrowed %v, kept %d; want none, 10 kept for the file", objects, nodes, tb.Borrowed(10), tb.Kept())
	}
}

// TestForgottenKeepsNumber: the object of a forgotten node whose number
// was not its own (rekeyed, or made up) gets that number again at its next
// node, whether or not its own number is borrowed; a number kept stays
// borrowed, so no other object gets it; an object a commit replaces loses
// its kept number; the node's own number is never kept.
func TestForgottenKeepsNumber(t *testing.T) {
	var tb Table[*node]
	mk := func(ino uint64) (*node, uint64) { return &node{"again", ino}, ino }

	// A commit gave the file (now inode 12) the node known as 10.
	n := &node{"f", 10}
	tb.Rekeyed(file(12, 1), n, n.ino)
	tb.Forget(n, n.ino)
	m, ok := tb.MadeUp(file(12, 1), 12, mk)
	if !ok || m == nil || m.ino != 10 {
		t.Fatalf("next node of the rekeyed file: %v, %v; want number 10", m, ok)
	}
	if tb.Kept() != 0 || !tb.Borrowed(10) {
		t.Errorf("with its node back: kept %d, 10 borrowed %v; want 0, true (the live node's)", tb.Kept(), tb.Borrowed(10))
	}
	// The same number again after a second forget; another file given
	// inode 10 by the backing filesystem meanwhile gets a made-up one.
	tb.Forget(m, m.ino)
	if other, ok := tb.MadeUp(file(10, 7), 10, mk); !ok || other.ino&BorrowedBit == 0 {
		t.Errorf("a new file with inode 10: %v, %v; want a made-up number", other, ok)
	}
	if again, ok := tb.MadeUp(file(12, 1), 12, mk); !ok || again.ino != 10 {
		t.Errorf("the rekeyed file after a second forget: %v, %v; want 10", again, ok)
	} else {
		tb.Forget(again, again.ino)
	}
	// A commit replaces the file: its kept number goes with it.
	tb.Succeeded(file(12, 1), file(13, 1))
	if _, ok := tb.MadeUp(file(12, 1), 12, mk); ok {
		t.Error("a file a commit replaced still got a kept number")
	}
	if tb.Borrowed(10) {
		t.Error("10 still borrowed once nothing is known by it")
	}
	// A node with its own number keeps nothing.
	own := &node{"own", 30}
	tb.Rekeyed(file(30, 1), own, own.ino) // CatchUp can leave a node its own number
	tb.Forget(own, own.ino)
	if tb.Borrowed(30) {
		t.Error("a node's own number was kept")
	}
}

// TestKeptBound: past maxNumbers the oldest half of the kept numbers go.
func TestKeptBound(t *testing.T) {
	var tb Table[*node]
	for i := range uint64(maxNumbers + 10) {
		n := &node{"f", BorrowedBit | i}
		tb.Rekeyed(file(1_000_000+i, 1), n, n.ino)
		tb.Forget(n, n.ino)
	}
	if got := tb.Kept(); got > maxNumbers || got < maxNumbers/2 {
		t.Errorf("kept %d; want between %d and %d", got, maxNumbers/2, maxNumbers)
	}
	if tb.Borrowed(BorrowedBit) { // the first kept: BorrowedBit | 0
		t.Error("the oldest kept number is still kept past the bound")
	}
	if !tb.Borrowed(BorrowedBit | (maxNumbers + 9)) {
		t.Error("the newest kept number went")
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

// TestKeptAgeCompacts: one file forgotten and looked up again and again
// keeps one number and the table's record of their order stays small.
func TestKeptAgeCompacts(t *testing.T) {
	var tb Table[*node]
	mk := func(ino uint64) (*node, uint64) { return &node{"again", ino}, ino }
	n := &node{"f", 10}
	tb.Rekeyed(file(12, 1), n, n.ino)
	for range 10000 {
		tb.Forget(n, n.ino)
		m, ok := tb.MadeUp(file(12, 1), 12, mk)
		if !ok || m.ino != 10 {
			t.Fatalf("the file's next node: %v, %v; want number 10", m, ok)
		}
		n = m
	}
	tb.Forget(n, n.ino)
	if tb.Kept() != 1 || len(tb.numbersAge) > 2*tb.Kept()+64 {
		t.Errorf("kept %d, their order %d long", tb.Kept(), len(tb.numbersAge))
	}
}
