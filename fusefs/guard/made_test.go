package guard

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
)

// TestMadeSetStamp: a made file is as the mount left it only with the
// same generation, size, mtime and ctime: cp -p over it (same size, mtime
// set back) still moves the ctime.
func TestMadeSetStamp(t *testing.T) {
	base := unix.Stat_t{Dev: 1, Ino: 2, Size: 10, Mtim: unix.Timespec{Sec: 100}, Ctim: unix.Timespec{Sec: 200}}
	for _, c := range []struct {
		name string
		gen  uint64
		mut  func(st *unix.Stat_t)
		want MadeState
	}{
		{"unchanged", 7, func(*unix.Stat_t) {}, MadeFresh},
		{"size", 7, func(st *unix.Stat_t) { st.Size++ }, MadeChanged},
		{"mtime", 7, func(st *unix.Stat_t) { st.Mtim.Nsec++ }, MadeChanged},
		{"ctime only (cp -p of the same size)", 7, func(st *unix.Stat_t) { st.Ctim.Nsec++ }, MadeChanged},
		{"another file with the number", 8, func(*unix.Stat_t) {}, NotMade},
	} {
		var s MadeSet
		s.Add(ID{Key: locks.KeyOf(&base), Gen: 7}, &base)
		st := base
		c.mut(&st)
		if got := s.Check(ID{Key: locks.KeyOf(&st), Gen: c.gen}, &st); got != c.want {
			t.Errorf("%s: check = %v, want %v", c.name, got, c.want)
		}
		if c.want != MadeFresh && s.Holds(locks.KeyOf(&base)) {
			t.Errorf("%s: still in the set", c.name)
		}
	}
}

// TestMadeSetRestamp: the mount's own change restamps a made file only if
// its look before the change was the set's.
func TestMadeSetRestamp(t *testing.T) {
	stamp := unix.Stat_t{Dev: 1, Ino: 2, Size: 10, Ctim: unix.Timespec{Sec: 200}}
	after := stamp
	after.Ctim.Sec = 300
	host := stamp
	host.Ctim.Sec = 250
	for _, c := range []struct {
		name   string
		before unix.Stat_t
		want   MadeState // of after
	}{
		{"the set's look before", stamp, MadeFresh},
		{"changed behind the mount before", host, MadeChanged},
	} {
		var s MadeSet
		id := ID{Key: locks.KeyOf(&stamp), Gen: 7}
		s.Add(id, &stamp)
		s.Restamp(id, &c.before, &after)
		if got := s.Check(id, &after); got != c.want {
			t.Errorf("%s: check after = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMadeSetCarry: a commit carries a made file to the file that replaced
// it, and only the generation the set holds: a recycled number is not.
func TestMadeSetCarry(t *testing.T) {
	old := unix.Stat_t{Dev: 1, Ino: 2, Size: 10}
	repl := unix.Stat_t{Dev: 1, Ino: 3, Size: 11}
	for _, c := range []struct {
		name     string
		gen      uint64 // of the file the commit replaced
		wantOld  MadeState
		wantNew  MadeState
		newInSet bool
		oldInSet bool
	}{
		{"the made file", 7, NotMade, MadeFresh, true, false},
		{"another file with its number", 8, MadeFresh, NotMade, false, true},
	} {
		var s MadeSet
		s.Add(ID{Key: locks.KeyOf(&old), Gen: 7}, &old)
		s.Carry(ID{Key: locks.KeyOf(&old), Gen: c.gen}, ID{Key: locks.KeyOf(&repl), Gen: 9}, &repl)
		if got := s.Holds(locks.KeyOf(&repl)); got != c.newInSet {
			t.Errorf("%s: the new file held = %v, want %v", c.name, got, c.newInSet)
		}
		if got := s.Holds(locks.KeyOf(&old)); got != c.oldInSet {
			t.Errorf("%s: the old file held = %v, want %v", c.name, got, c.oldInSet)
		}
		if got := s.Check(ID{Key: locks.KeyOf(&repl), Gen: 9}, &repl); got != c.wantNew {
			t.Errorf("%s: the new file = %v, want %v", c.name, got, c.wantNew)
		}
		if got := s.Check(ID{Key: locks.KeyOf(&old), Gen: 7}, &old); got != c.wantOld {
			t.Errorf("%s: the old file = %v, want %v", c.name, got, c.wantOld)
		}
	}
}

// TestIDs: an identity is known with its generation only, and Has waits
// for the scan while Knows does not.
func TestIDs(t *testing.T) {
	var c IDs
	scanned := make(chan struct{})
	c.scanned = scanned
	id := ID{Key: locks.Key{Dev: 1, Ino: 2}, Gen: 3}
	c.Add(id)
	if !c.Knows(id) || c.Knows(ID{Key: id.Key, Gen: 4}) {
		t.Errorf("Knows: the identity %v, another generation %v; want true, false", c.Knows(id), c.Knows(ID{Key: id.Key, Gen: 4}))
	}
	done := make(chan bool)
	go func() { done <- c.Has(id) }()
	select {
	case <-done:
		t.Fatal("Has answered before the scan finished")
	default:
	}
	close(scanned)
	if !<-done {
		t.Error("Has after the scan: false, want true")
	}
}
