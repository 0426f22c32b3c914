package callers

import (
	"sync"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

func TestSet(t *testing.T) {
	var s Set
	if n := s.Take(nil); n != 0 {
		t.Fatalf("empty set: %d", n)
	}
	for range 100 {
		s.Note(4242) // one thread, many requests
	}
	s.Note(0) // the kernel's own
	if n := s.Take(nil); n != 1 {
		t.Fatalf("one thread: %d, want 1", n)
	}
	if n := s.Take(nil); n != 0 {
		t.Fatalf("after a take: %d, want 0", n)
	}
	s.Note(1000)
	s.Note(1001)
	s.Note(1002)
	s.Note(1000 + slots) // shares 1000's slot: counts once
	if n := s.Take(nil); n != 3 {
		t.Fatalf("four threads, two sharing a slot: %d, want 3", n)
	}
}

// TestSetConcurrent: notes from many goroutines while another takes lose
// no thread between takes (run with -race).
func TestSetConcurrent(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 1000 {
				s.Note(uint32(100 + g))
			}
		})
	}
	total := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			total += s.Take(nil)
			if total < 8 {
				t.Fatalf("saw %d threads over the takes, want at least 8", total)
			}
			return
		default:
			total += s.Take(nil)
		}
	}
}

func TestFSNotesCallersNotReleases(t *testing.T) {
	var s Set
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), Seen: &s}
	fs.Lookup(nil, &fuse.InHeader{Caller: fuse.Caller{Pid: 7}}, "a", &fuse.EntryOut{})
	fs.Unlink(nil, &fuse.InHeader{Caller: fuse.Caller{Pid: 8}}, "a")
	in := &fuse.ReleaseIn{}
	in.Caller.Pid = 9
	fs.ReleaseDir(in)
	fs.Release(nil, in)
	if n := s.Take(nil); n != 2 {
		t.Fatalf("a LOOKUP, an UNLINK and two releases: %d callers, want 2", n)
	}
}

// TestSetCountsProcesses: threads of one process count once; the
// process of a thread is asked once.
func TestSetCountsProcesses(t *testing.T) {
	var s Set
	asked := map[uint32]int{}
	tgid := func(tid uint32) uint32 { asked[tid]++; return tid / 100 * 100 }
	s.Note(501)
	s.Note(502)
	s.Note(503) // three threads of process 500
	s.Note(700) // process 700
	if n := s.Take(tgid); n != 2 {
		t.Fatalf("three threads of one process and one of another: %d, want 2", n)
	}
	s.Note(501)
	if n := s.Take(tgid); n != 1 {
		t.Fatalf("one thread again: %d, want 1", n)
	}
	if asked[501] != 1 {
		t.Errorf("thread 501's process read %d times, want once", asked[501])
	}
}

// TestOnRequest: the function set runs at each request noted, the
// kernel's own included, and another set replaces it.
func TestOnRequest(t *testing.T) {
	var c Set
	c.Note(7) // none set: nothing runs
	a, b := 0, 0
	c.OnRequest(func() { a++ })
	c.Note(7)
	c.Note(0)
	c.OnRequest(func() { b++ })
	c.Note(8)
	if a != 2 || b != 1 || c.Requests() != 4 {
		t.Errorf("runs %d then %d, requests %d; want 2, 1, 4", a, b, c.Requests())
	}
}
