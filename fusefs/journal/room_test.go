package journal

import (
	"errors"
	"syscall"
	"testing"
)

// fakeRoom is an Options.Room of left bytes: what passes it is refused,
// first on the first refusal since the last that fit.
type fakeRoom struct {
	left    int64
	asked   int
	refused bool
}

func (r *fakeRoom) take(n int64) (refused, first bool) {
	r.asked++
	if n > r.left {
		first = !r.refused
		r.refused = true
		return true, first
	}
	r.left -= n
	r.refused = false
	return false, false
}

// TestRoomRefusesPastPreallocation: the intents of a segment that grows
// past its preallocation take BACKING's room (a root daemon's writes would
// otherwise go into root's reserve); past it the change is refused before
// anything is appended or kept (ENOSPC, ErrNoRoom, First once a burst),
// Grown is signalled, and the next Prune drops a segment's worth more than
// its bounds ask, after which changes are recorded again. A reopen with
// no room at all recovers (recovery's records are of changes made).
func TestRoomRefusesPastPreallocation(t *testing.T) {
	b := newBacking(t)
	room := &fakeRoom{left: 1000}
	j := b.open(t, Options{SegmentSize: 64 << 10, Room: room.take})
	rewrites(t, b, j, 1)
	if room.asked != 0 {
		t.Fatalf("Room asked %d times within the preallocation", room.asked)
	}
	grown(j)
	// As a segment made on a filesystem with no room to preallocate it.
	j.mu.Lock()
	j.cur.alloc = j.cur.off
	j.mu.Unlock()

	made := 1
	var err error
	for ; made < 100 && err == nil; made++ {
		b.write(t, ".t", "new")
		var c *Change
		if c, err = j.Begin(Record{Owner: "session:1", Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, b.pathFd(t, "f")); err == nil {
			mv(t, b, ".t", "f")
			must(t, c.Done(nil))
		}
	}
	made-- // the last did not begin
	var re *RoomError
	if !errors.As(err, &re) || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrNoRoom) || !re.First {
		t.Fatalf("after %d changes: %v, want a first RoomError (ENOSPC, ErrNoRoom)", made, err)
	}
	if made < 2 || room.left < 0 {
		t.Fatalf("%d changes recorded on 1000 bytes of room (%d left)", made, room.left)
	}
	keptBefore := keptEntries(t, b)
	recs, rerr := j.Records(Filter{})
	must(t, rerr)
	if len(recs) != made {
		t.Errorf("%d records after %d changes and a refusal", len(recs), made)
	}
	_, err = j.Begin(Record{Owner: "session:1", Op: OpChmod, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, NoKeep)
	if !errors.As(err, &re) || re.First {
		t.Errorf("second refusal: %v, want a RoomError not first", err)
	}
	if got := keptEntries(t, b); got != keptBefore {
		t.Errorf("kept/ went from %d to %d entries over refused changes", keptBefore, got)
	}
	if !grown(j) {
		t.Error("a refusal for room did not signal Grown")
	}

	st, err := j.Prune(Bounds{MaxBytes: 1 << 40})
	must(t, err)
	if st.Segments == 0 {
		t.Fatalf("the prune after a refusal dropped nothing: %+v", st)
	}
	c, err := j.Begin(Record{Owner: "session:1", Op: OpChmod, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, NoKeep)
	if err != nil {
		t.Fatalf("a change after the prune: %v", err)
	}
	must(t, c.Done(nil))
	if st, err = j.Prune(Bounds{MaxBytes: 1 << 40}); err != nil || st.Segments != 0 {
		t.Errorf("a second prune, squeezed no more: %+v, %v; want nothing dropped", st, err)
	}
	must(t, j.Close())

	none := &fakeRoom{}
	j2 := b.open(t, Options{SegmentSize: 64 << 10, Room: none.take})
	if recs, err := j2.Records(Filter{}); err != nil || len(recs) != 1 {
		t.Errorf("reopened with no room: %d records, %v; want the one after the prune", len(recs), err)
	}
}

// TestSqueezeLeavesGrownsBounds: the bounds a squeezed Prune drops to are
// its own; those it stores for Grown stay the ones it was given, so the
// changes after it do not signal Grown at every kept object.
func TestSqueezeLeavesGrownsBounds(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 64 << 10})
	rewrites(t, b, j, 3)
	given := Bounds{MaxBytes: 1 << 40, MaxFiles: 1 << 20}
	j.squeezed.Store(true)
	if _, err := j.Prune(given); err != nil {
		t.Fatal(err)
	}
	if got := *j.bounds.Load(); got.MaxBytes != given.MaxBytes || got.MaxFiles != given.MaxFiles || got.Keep != given.Keep {
		t.Errorf("Grown's bounds after a squeezed Prune: %+v, want %+v", got, given)
	}
	grown(j)
	rewrites(t, b, j, 1)
	if grown(j) {
		t.Error("a change after a squeezed Prune signalled Grown, far within the bounds")
	}
}
