package journal

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// openReader opens b's default journal for reading, closed at the test's
// end.
func (b *backing) openReader(t testing.TB) *Reader {
	t.Helper()
	r, err := OpenReader(b.root, DefaultDir)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// TestReaderNoJournal: a BACKING with no journal is ErrNoJournal.
func TestReaderNoJournal(t *testing.T) {
	b := newBacking(t)
	if _, err := OpenReader(b.root, DefaultDir); !errors.Is(err, ErrNoJournal) {
		t.Fatalf("OpenReader of a BACKING with no journal: %v, want ErrNoJournal", err)
	}
	must(t, os.Mkdir(b.jpath(), 0o700))
	if _, err := OpenReader(b.root, DefaultDir); !errors.Is(err, ErrNoJournal) {
		t.Fatalf("OpenReader of a journal directory with no log/: %v, want ErrNoJournal", err)
	}
}

// TestReaderRefusesJournalsNotItsOwn: records another user could have
// written are never read (undo would act on them, as root where it runs
// as root): a journal directory, log/ or kept/ owned by another uid, or
// writable by group or others, is ErrNotOwned, named.
func TestReaderRefusesJournalsNotItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the journal to another user")
	}
	tests := []struct {
		name, want string
		spoil      func(t *testing.T, b *backing)
	}{
		{"directory of another uid", "its directory is owned by uid 65534", func(t *testing.T, b *backing) {
			must(t, os.Chown(b.jpath(), 65534, 65534))
		}},
		{"log/ of another uid", "log/ is owned by uid 65534", func(t *testing.T, b *backing) {
			must(t, os.Chown(b.jpath(logName), 65534, 65534))
		}},
		{"kept/ of another uid", "kept/ is owned by uid 65534", func(t *testing.T, b *backing) {
			must(t, os.Chown(b.jpath(keptName), 65534, 65534))
		}},
		{"directory writable by others", "its directory is writable by its group or others (mode 0777)", func(t *testing.T, b *backing) {
			must(t, os.Chmod(b.jpath(), 0o777))
		}},
		{"log/ writable by its group", "log/ is writable by its group or others (mode 0770)", func(t *testing.T, b *backing) {
			must(t, os.Chmod(b.jpath(logName), 0o770))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBacking(t)
			must(t, b.open(t, Options{}).Close())
			tt.spoil(t, b)
			r, err := OpenReader(b.root, DefaultDir)
			if err == nil {
				r.Close()
				t.Fatal("OpenReader read a journal not its own")
			}
			if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want ErrNotOwned saying %q", err, tt.want)
			}
		})
	}
}

// TestReaderBesideWriter: a Reader reads while the writer holds LOCK and
// appends from several goroutines (segments rotating): each read is a
// prefix of the changes in seq order, each record whole, and the last
// read, once the writer is done and has written the ends it held, has
// every change ended. The Reader takes
// no lock and writes nothing: the writer's LOCK is untouched.
func TestReaderBesideWriter(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 4 << 10})
	b.write(t, "f", "v1")
	r := b.openReader(t)
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c, err := j.Begin(Record{Op: OpChmod, Owner: "pid:" + string(rune('a'+w)), Path: "f"}, NoKeep)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					err = c.Done(nil)
				} else {
					err = c.Abort()
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for finished := false; !finished; reads++ {
		select {
		case <-done:
			finished = true
			// The last ends are held (ends.go) until the timer, Close or
			// the writer's own Records writes them: the latter, here.
			_, err := j.Records(Filter{})
			must(t, err)
		default:
		}
		recs, err := r.Records(Filter{})
		must(t, err)
		for i, rec := range recs {
			if rec.Seq != uint64(i+1) || rec.Op != OpChmod || rec.Path != "f" {
				t.Fatalf("read %d: record %d is %+v", reads, i, rec)
			}
			if finished && rec.End == "" {
				t.Fatalf("change %d has no end once the writers are done", rec.Seq)
			}
		}
		if finished && len(recs) != writers*each {
			t.Fatalf("%d records read once the writers are done, want %d", len(recs), writers*each)
		}
	}
	t.Logf("%d reads beside the writers", reads)
	recs, err := r.Records(Filter{Owner: "pid:a"})
	must(t, err)
	if len(recs) != each {
		t.Errorf("owner pid:a: %d records, want %d", len(recs), each)
	}
	if _, err := Open(b.root, DefaultDir, Options{}); !errors.Is(err, ErrLocked) {
		t.Errorf("a second writer beside the reader: %v, want ErrLocked", err)
	}
}

// TestReaderTornTail: a torn last line (and junk after it) ends what the
// Reader reads, an intent with no end is in flight (End ""), and the
// segment is left as it was: the Reader cuts nothing.
func TestReaderTornTail(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{SegmentSize: 64 << 10})
	b.write(t, "f", "v1")
	c, err := j.Begin(Record{Op: OpRewrite, Path: "f", Before: ObjectOf(b.stat(t, "f"))}, b.pathFd(t, "f"))
	must(t, err)
	must(t, c.Done(nil))
	_, err = j.Begin(Record{Op: OpChmod, Path: "f"}, NoKeep) // no end
	must(t, err)
	must(t, j.Close())
	seg := b.jpath(logName, segmentName(1))
	data, err := os.ReadFile(seg)
	must(t, err)
	sc := parseSegment(data)
	torn := []byte(`{"seq":3,"time":"2026-12-03T17:00:00Z","op":"unl`)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(torn, sc.valid)
	must(t, err)
	must(t, f.Close())

	r := b.openReader(t)
	recs, err := r.Records(Filter{})
	must(t, err)
	if len(recs) != 2 || recs[0].End != Done || recs[1].End != "" || !recs[0].Kept {
		t.Fatalf("records %+v: want the rewrite done and kept, the chmod with no end", recs)
	}
	after, err := os.ReadFile(seg)
	must(t, err)
	if string(after) != string(data[:sc.valid])+string(torn)+string(data[sc.valid+int64(len(torn)):]) {
		t.Error("the Reader changed the segment")
	}
	fd, err := r.OpenKept(recs[0].Seq)
	must(t, err)
	defer dirfd.Close(fd)
	var st unix.Stat_t
	must(t, dirfd.Fstat(fd, &st))
	if st.Ino != recs[0].Before.Ino {
		t.Errorf("kept/%d is inode %d, want the old file's %d", recs[0].Seq, st.Ino, recs[0].Before.Ino)
	}
	if _, err := r.OpenKept(recs[1].Seq); !errors.Is(err, unix.ENOENT) {
		t.Errorf("OpenKept of a change that kept nothing: %v, want ENOENT", err)
	}
}

// TestEndsHeld: an end is not written by itself but with the next intent
// (one write for both), or by the timer once no intent comes; a kill -9
// loses at most the held ends, which recovery settles by identity.
func TestEndsHeld(t *testing.T) {
	b := newBacking(t)
	j := b.open(t, Options{})
	b.write(t, "f", "v1")
	r := b.openReader(t)
	ended := func(seq uint64) bool {
		recs, err := r.Records(Filter{})
		must(t, err)
		for _, rec := range recs {
			if rec.Seq == seq {
				return rec.End != ""
			}
		}
		t.Fatalf("change %d not read", seq)
		return false
	}
	c1, err := j.Begin(Record{Op: OpChmod, Owner: "pid:1", Path: "f"}, NoKeep)
	must(t, err)
	j.mu.Lock()
	timer := j.endsTimer
	j.mu.Unlock()
	if timer != nil {
		t.Fatal("an end timer armed with no end held")
	}
	must(t, c1.Done(nil))
	if ended(c1.Seq()) {
		t.Errorf("change %d's end was written by itself", c1.Seq())
	}
	c2, err := j.Begin(Record{Op: OpChmod, Owner: "pid:1", Path: "f"}, NoKeep)
	must(t, err)
	if !ended(c1.Seq()) {
		t.Errorf("change %d's end was not written with the next intent", c1.Seq())
	}
	must(t, c2.Done(nil))
	// The timer writes c2's end: wait for its write, a bounded number of
	// the reader's reads apart (each read is an event, not a sleep).
	j.mu.Lock()
	armed := j.endsTimer != nil
	j.mu.Unlock()
	if !armed {
		t.Fatal("no end timer armed with an end held")
	}
	for !ended(c2.Seq()) {
		runtime.Gosched()
	}
}
