package writeengine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/writeproto"
	"github.com/realm-dev/realm/procinfo"
)

// The handle's events as the adapter passes them on (File), with what a
// close finds of its thread set by the test (fakeProcs).

// TestFileKilledWriter: the bytes of a writer killed by a signal are
// committed where that tears nothing old (the file was empty, or it was
// only appended to) and kept as NAME.realm-recovered-* otherwise, the file
// unchanged; a temp that a failed write left short is never committed.
// Each outcome is one audit line, whose cause names the signal.
func TestFileKilledWriter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old        string
		flags      int
		data       string
		failed     bool
		want, copy string // copy "": no recovery copy
		code       string
	}{
		{"new file", "", unix.O_WRONLY | unix.O_TRUNC, "half", false, "half", "", "WRITER_KILLED_COMMITTED"},
		{"append", "old", unix.O_WRONLY | unix.O_APPEND, "+half", false, "old+half", "", "WRITER_KILLED_COMMITTED"},
		{"rewrite", "old", unix.O_WRONLY | unix.O_TRUNC, "half", false, "old", "half", "WRITER_KILLED_RECOVERED"},
		{"append with O_TRUNC", "old", unix.O_WRONLY | unix.O_APPEND | unix.O_TRUNC, "half", false, "old", "half", "WRITER_KILLED_RECOVERED"},
		{"in place", "old content", unix.O_RDWR, "OLD", false, "old content", "OLD content", "WRITER_KILLED_RECOVERED"},
		{"short write to a new file", "", unix.O_WRONLY, "half", true, "", "half", "WRITER_KILLED_RECOVERED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDir(t, tc.old)
			f := d.open(t, "a", tc.flags)
			d.write(t, f, tc.flags&unix.O_APPEND != 0, tc.data, 0)
			if tc.failed {
				f.Change(context.Background(), func(int) syscall.Errno { return syscall.EIO })
			}
			d.procs.set(func(p *procFacts) { p.signal = int(unix.SIGKILL) })
			d.close(f)
			d.want(t, "f", tc.want, "after its writer was killed")
			var copies []string
			for _, n := range d.others(t) {
				if strings.HasPrefix(n, "f.realm-recovered-") {
					copies = append(copies, n)
				} else {
					t.Errorf("left beside the file: %s", n)
				}
			}
			switch {
			case tc.copy == "" && len(copies) > 0:
				t.Errorf("recovery copies %q, want none", copies)
			case tc.copy != "" && len(copies) != 1:
				t.Errorf("recovery copies %q, want one", copies)
			case tc.copy != "":
				d.want(t, copies[0], tc.copy, "the recovery copy")
			}
			if len(d.host.audits) != 1 || d.host.audits[0] != "close "+tc.code || !strings.Contains(d.host.causes[0], "SIGKILL") {
				t.Errorf("audit lines %q (causes %q), want one close %s naming SIGKILL", d.host.audits, d.host.causes, tc.code)
			}
		})
	}
}

// TestFileCloseCommitsOnlyTheLast: a close commits when the opener's
// thread closes its last descriptor of the open and no write(2) through
// it goes on; any other close leaves the bytes to the RELEASE, which
// commits them (the owner's last handle).
func TestFileCloseCommitsOnlyTheLast(t *testing.T) {
	for _, tc := range []struct {
		name     string
		facts    procFacts
		inFlight bool // another thread's WRITE is being served
		commits  bool
		log      string // a line the close logs
	}{
		{name: "the opener's last", commits: true},
		{name: "another process's", facts: procFacts{stranger: true}},
		{name: "beside another descriptor", facts: procFacts{others: 1}},
		{name: "unknown", facts: procFacts{err: errors.New("no /proc")}, log: "cannot tell whether its opener closed its last descriptor (no /proc): committing at the last close"},
		{name: "beside a write in flight", inFlight: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDir(t, "old")
			f := d.open(t, "a", unix.O_TRUNC)
			d.write(t, f, false, "new", 0)
			d.procs.set(func(p *procFacts) { *p = tc.facts })
			if tc.inFlight {
				f.writes.Add(1)
			}
			if errno := f.Flush(context.Background(), 1); errno != 0 {
				t.Fatalf("flush = %v", errno)
			}
			want := map[bool]string{true: "new", false: "old"}[tc.commits]
			d.want(t, "f", want, "after the close")
			if tc.log != "" && !slices.ContainsFunc(d.host.logs, func(l string) bool { return strings.Contains(l, tc.log) }) {
				t.Errorf("logs %q, want %q", d.host.logs, tc.log)
			}
			f.writes.Store(0)
			f.Release(context.Background())
			d.want(t, "f", "new", "after the release")
			if got := d.others(t); len(got) != 0 {
				t.Errorf("left beside the file: %q", got)
			}
		})
	}
}

// TestFileWriteGoesOn: a close by one thread while the thread that sent
// the open's last WRITE may be inside the same write(2) (writeGoesOn)
// commits once that thread is seen out of it: stopped outside any
// write(2), or it ran its own code for two ticks, or it is elsewhere past
// WriteGap, or asleep on a FUSE answer a WriteGap longer; a WRITE that
// comes meanwhile leaves the commit to the RELEASE, and so does one that
// comes while the writer, inside a write(2), waits on FUSE longer than
// the FUSE grace, or got one tick of user time (the kernel's scaling of
// its time in the kernel).
func TestFileWriteGoesOn(t *testing.T) {
	gap := writeproto.WriteGap
	for _, tc := range []struct {
		name    string
		writer  procinfo.WriterState
		syscall procinfo.SyscallState
		run     uint64 // the user ticks the writer gains once the close watches it
		write   bool   // it sends another WRITE then
		copy    bool   // its changes are copy_file_range(2)s, not WRITEs
		commits bool
		atLeast time.Duration // the rule's own wait: a bound no load can shorten
		samples int           // at least
	}{
		// One sample when the close starts past the gap (a loaded machine
		// is slow to flush after the write): asleep elsewhere then is out.
		{name: "elsewhere", writer: procinfo.WriterIdle, commits: true, atLeast: gap, samples: 1},
		{name: "stopped outside any write", writer: procinfo.WriterBusy, syscall: procinfo.SyscallOutside, commits: true, samples: 1},
		{name: "asleep on FUSE", writer: procinfo.WriterOnFUSE, commits: true, atLeast: 2 * gap, samples: 2},
		{name: "asleep on FUSE in a write, then its next WRITE", writer: procinfo.WriterOnFUSE, syscall: procinfo.SyscallInWrite, write: true, atLeast: 0, samples: 1},
		{name: "busy, then its own code", writer: procinfo.WriterBusy, run: 2, commits: true, samples: 2},
		{name: "busy, a tick, then its next WRITE", writer: procinfo.WriterBusy, syscall: procinfo.SyscallRunning, run: 1, write: true, samples: 1},
		{name: "busy, then its next WRITE", writer: procinfo.WriterBusy, write: true, samples: 1},
		{name: "asleep on FUSE in a copy, then its next copy", writer: procinfo.WriterOnFUSE, syscall: procinfo.SyscallInWrite, write: true, copy: true, samples: 1},
		{name: "a copy, then its own code", writer: procinfo.WriterBusy, syscall: procinfo.SyscallOutside, copy: true, commits: true, samples: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDir(t, "old")
			f := d.open(t, "a", unix.O_TRUNC)
			d.procs.sampled = make(chan struct{}, 1)
			// change is thread 2's WRITE of b at off, or its copy of b
			// from a file outside the mount.
			change := func(b string, off int64) (int, syscall.Errno) {
				if !tc.copy {
					return f.Write(context.Background(), 2, 0, false, []byte(b), off)
				}
				src := filepath.Join(t.TempDir(), "src")
				if err := os.WriteFile(src, []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
				fd, err := unix.Open(src, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				return f.CopyIn(context.Background(), 2, fd, 0, uint64(off), uint64(len(b)), 0)
			}
			start := time.Now() // before the write ends: the rule's waits count from there
			if n, errno := change("new", 0); errno != 0 || n != 3 {
				t.Fatalf("write by thread 2 = %d, %v", n, errno)
			}
			d.procs.set(func(p *procFacts) { p.writer, p.ticks, p.syscall = tc.writer, 5, tc.syscall })
			done, flushed := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				if tc.run == 0 && !tc.write {
					return
				}
				// The close watches the writer: now it acts. A close that
				// does not watch it is over first, and fails below.
				select {
				case <-d.procs.sampled:
				case <-flushed:
					return
				}
				d.procs.set(func(p *procFacts) { p.ticks += tc.run })
				if tc.write {
					if tc.run > 0 {
						<-d.procs.sampled // the close saw the tick
					}
					change("!", 3)
				}
			}()
			errno := f.Flush(context.Background(), 1)
			close(flushed)
			if errno != 0 {
				t.Fatalf("flush = %v", errno)
			}
			if took := time.Since(start); took < tc.atLeast {
				t.Errorf("the close took %v, less than the rule's wait %v", took, tc.atLeast)
			}
			d.procs.mu.Lock()
			asked := d.procs.asked
			d.procs.mu.Unlock()
			if asked < tc.samples {
				t.Errorf("%d samples of the writer, want at least %d", asked, tc.samples)
			}
			d.want(t, "f", map[bool]string{true: "new", false: "old"}[tc.commits], "after the close")
			<-done
			f.Release(context.Background())
			d.want(t, "f", map[bool]string{true: "new", false: "new!"}[tc.commits], "after the release")
		})
	}
}

// TestFileFailedOpenKeepsContent: the kernel may fail an open after the
// daemon made its handle and release it with no FLUSH ever: the process
// never had the file, and its O_TRUNC must not empty it. A truncation
// that reached the process (: > f, closed) is committed.
func TestFileFailedOpenKeepsContent(t *testing.T) {
	d := newEngineDir(t, "content")
	f := d.open(t, "a", unix.O_TRUNC)
	f.Release(context.Background())
	d.want(t, "f", "content", "after the release of a handle whose open failed")
	if !slices.ContainsFunc(d.host.logs, func(l string) bool { return strings.Contains(l, "failed in the kernel") }) {
		t.Errorf("logs %q do not say why the truncation was not committed", d.host.logs)
	}
	f = d.open(t, "a", unix.O_TRUNC)
	d.procs.set(func(p *procFacts) { p.stranger = true }) // its close commits nothing
	f.Flush(context.Background(), 1)
	d.want(t, "f", "content", "after another process's close")
	f.Release(context.Background())
	d.want(t, "f", "", "after the release of a truncating open that was closed")
}

// TestFileSameOpen: a close's scan counts the opener's descriptors of the
// access mode, and tells O_APPEND apart only when the opener has another
// open of the file with the other O_APPEND; O_APPEND is the handle's as
// its last WRITE carried it (fcntl(F_SETFL)), which appends at the end.
func TestFileSameOpen(t *testing.T) {
	d := newEngineDir(t, "0123")
	plain := d.open(t, "a", unix.O_RDWR)
	like := func(f *File[*fakeNode]) procinfo.SameOpen {
		d.procs.set(func(p *procFacts) { p.others = 1 }) // commits nothing
		f.Flush(context.Background(), 1)
		d.procs.mu.Lock()
		defer d.procs.mu.Unlock()
		return d.procs.like
	}
	d.write(t, plain, false, "x", 0)
	if got := like(plain); got != (procinfo.SameOpen{Mask: unix.O_ACCMODE, Flags: unix.O_RDWR}) {
		t.Errorf("alone: the scan looks for %+v", got)
	}
	appender := d.open(t, "a", unix.O_RDWR|unix.O_APPEND)
	if got := like(plain); got != (procinfo.SameOpen{Mask: unix.O_ACCMODE | unix.O_APPEND, Flags: unix.O_RDWR}) {
		t.Errorf("beside an appender: the scan looks for %+v", got)
	}
	appender.Release(context.Background())
	// fcntl(F_SETFL, O_APPEND): the next WRITE carries it.
	if n, errno := plain.Write(context.Background(), 1, unix.O_APPEND, true, []byte("+"), 0); errno != 0 || n != 1 {
		t.Fatalf("append = %d, %v", n, errno)
	}
	if got := like(plain); got.Flags != unix.O_RDWR|unix.O_APPEND {
		t.Errorf("after an fcntl's append: the scan looks for %+v", got)
	}
	d.procs.set(func(p *procFacts) { *p = procFacts{} })
	if errno := d.close(plain); errno != 0 {
		t.Fatalf("close = %v", errno)
	}
	d.want(t, "f", "x123+", "after the close")
}

// TestFileCopies: copy_file_range into a write's temp from a descriptor,
// or from another write's content (both entries locked, lockPair); from
// the write itself is EXDEV.
func TestFileCopies(t *testing.T) {
	d := newEngineDir(t, "ffff")
	if err := os.WriteFile(filepath.Join(d.path, "g"), []byte("gggg"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := d.openAs("a", "f", unix.O_RDWR, 1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.openAs("a", "g", unix.O_RDWR, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.write(t, g, false, "G", 0)
	if n, errno := f.CopyFrom(context.Background(), 1, g, 0, 0, 2, 0); errno != 0 || n != 2 {
		t.Fatalf("copy from g = %d, %v", n, errno)
	}
	if _, errno := f.CopyFrom(context.Background(), 1, f, 0, 0, 1, 0); errno != syscall.EXDEV {
		t.Errorf("copy within one write = %v, want EXDEV", errno)
	}
	src, err := dirfd.Open(d.dfd, "g", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(src)
	if n, errno := f.CopyIn(context.Background(), 1, src, 0, 3, 1, 0); errno != 0 || n != 1 {
		t.Fatalf("copy from a descriptor = %d, %v", n, errno)
	}
	d.want(t, "f", "ffff", "before the close")
	d.close(f)
	d.close(g)
	d.want(t, "f", "Ggfg", "after the close")
	d.want(t, "g", "Gggg", "after its close")
}

// TestFileKilledBesideAClosedSibling: a writer killed after another
// process of its owner closed its own open of the file (whose RELEASE the
// kernel queued first, and the daemon serves second) is judged alone once
// that RELEASE lands: its rewrite of old content is kept as a recovery
// copy, the file unchanged. A sibling whose RELEASE does not come (a
// forked child holds its descriptor) shares the bytes: the kill commits
// nothing, and the owner's last release commits them all.
func TestFileKilledBesideAClosedSibling(t *testing.T) {
	for _, released := range []bool{true, false} {
		t.Run(map[bool]string{true: "released", false: "held by a child"}[released], func(t *testing.T) {
			d := newEngineDir(t, "old content")
			killed, err := d.openAs("a", "f", unix.O_RDWR, 1)
			if err != nil {
				t.Fatal(err)
			}
			sibling, err := d.openAs("a", "f", unix.O_RDWR, 2)
			if err != nil {
				t.Fatal(err)
			}
			d.write(t, sibling, false, "SIB", 0)
			d.write(t, killed, false, "KILLED", 3)
			ctx := context.Background()
			if errno := sibling.Flush(ctx, 2); errno != 0 {
				t.Fatalf("the sibling's close = %v", errno)
			}
			d.want(t, "f", "old content", "after the sibling's close beside a writer")
			d.procs.set(func(p *procFacts) { p.signal = int(unix.SIGKILL) })
			done := make(chan syscall.Errno)
			go func() { done <- killed.Flush(ctx, 1) }()
			if released {
				waitAwaiting(t, killed, done)
				sibling.Release(ctx)
			}
			if errno := <-done; errno != 0 {
				t.Fatalf("the killed writer's close = %v", errno)
			}
			killed.Release(ctx)
			if !released {
				d.want(t, "f", "old content", "before the child's release")
				sibling.Release(ctx)
				d.want(t, "f", "SIBKILLEDnt", "after the owner's last release")
				return
			}
			d.want(t, "f", "old content", "after the killed writer's release")
			copies := d.others(t)
			if len(copies) != 1 || !strings.HasPrefix(copies[0], "f.realm-recovered-") {
				t.Fatalf("beside the file: %q, want one recovery copy", copies)
			}
			d.want(t, copies[0], "SIBKILLEDnt", "the recovery copy")
		})
	}
}

// waitAwaiting returns once f's close waits for a release (awaitReleases);
// a close that ends first (done) fails t.
func waitAwaiting(t *testing.T, f *File[*fakeNode], done <-chan syscall.Errno) {
	t.Helper()
	for {
		select {
		case errno := <-done:
			t.Fatalf("the killed writer's close returned (%v) without waiting for the sibling's release", errno)
		default:
		}
		var waits bool
		f.locked(func(w *Write[*fakeNode]) syscall.Errno {
			waits = w.released != nil
			return 0
		})
		if waits {
			return
		}
		runtime.Gosched()
	}
}
