package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/nodeopens"
	"github.com/realm-dev/realm/locks"
)

// TestViewsOfAFileInFlux: while process 1 (its own owner) writes f, its
// stats and lookups show its bytes and everyone else's show the file as
// committed, whichever handle answers; none of those attributes may be
// cached by the kernel until the write is over.
func TestViewsOfAFileInFlux(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.attrTimeout = time.Minute
	tf.write(t, "f", "old content")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "new")
	n := h.node

	getattr := func(pid uint32, fh *writeHandle) (uint64, time.Duration) {
		t.Helper()
		var out fuse.AttrOut
		var errno syscall.Errno
		if fh == nil {
			errno = n.Getattr(as(pid), nil, &out)
		} else {
			errno = n.Getattr(as(pid), fh, &out)
		}
		if errno != 0 {
			t.Fatalf("getattr as %d: %v", pid, errno)
		}
		return out.Size, out.Timeout()
	}
	lookup := func(pid uint32) (uint64, time.Duration) {
		t.Helper()
		var out fuse.EntryOut
		if _, errno := tf.root.Lookup(as(pid), "f", &out); errno != 0 {
			t.Fatalf("lookup as %d: %v", pid, errno)
		}
		return out.Size, out.AttrTimeout()
	}
	for _, tc := range []struct {
		what string
		get  func() (uint64, time.Duration)
		want uint64
	}{
		{"the writer's fstat", func() (uint64, time.Duration) { return getattr(1, h) }, 3},
		{"the writer's stat by name", func() (uint64, time.Duration) { return getattr(1, nil) }, 3},
		{"another owner's stat, the writer's handle lent", func() (uint64, time.Duration) { return getattr(2, h) }, 11},
		{"another owner's stat by name", func() (uint64, time.Duration) { return getattr(2, nil) }, 11},
		{"the writer's lookup", func() (uint64, time.Duration) { return lookup(1) }, 3},
		{"another owner's lookup", func() (uint64, time.Duration) { return lookup(2) }, 11},
	} {
		size, ttl := tc.get()
		if size != tc.want || ttl != 0 {
			t.Errorf("%s: size %d, cached for %v; want %d, not cached", tc.what, size, ttl, tc.want)
		}
	}

	// Another owner's reader opened now reads direct: a read through the
	// page cache would stop at the size the kernel last heard of.
	_, flags, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 || flags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Errorf("another owner's read open while f is written: flags %#x, %v; want direct I/O", flags, errno)
	}

	h.Release(as(1))
	if size, ttl := getattr(2, nil); size != 3 || ttl != time.Minute {
		t.Errorf("after the commit: size %d, cached for %v; want 3 for a minute", size, ttl)
	}
}

// TestWriteOpenRetiresCachedReaders: a write open on a node whose readers
// read through the page cache (no passthrough) gets ESTALE, so that the
// kernel looks the name up again and the writer's size never becomes the
// readers' inode's; the readers keep reading the old file.
func TestWriteOpenRetiresCachedReaders(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	n := tf.lookup(t, "f")
	r, flags, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 || flags&fuse.FOPEN_DIRECT_IO != 0 {
		t.Fatalf("read open: flags %#x, %v; want one through the page cache", flags, errno)
	}
	if _, _, errno := n.Open(as(1), syscall.O_WRONLY|syscall.O_TRUNC); errno != syscall.ESTALE {
		t.Fatalf("write open beside a cached reader = %v, want ESTALE", errno)
	}
	m := tf.lookup(t, "f")
	if m == n {
		t.Fatal("the lookup after the retirement found the retired node")
	}
	w, _, errno := m.Open(as(1), syscall.O_WRONLY|syscall.O_TRUNC)
	if errno != 0 {
		t.Fatalf("write open on the new node: %v", errno)
	}
	writeAll(t, fileOf(w), "new")
	buf := make([]byte, 16)
	res, errno := fileOf(r).Read(as(2), buf, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := res.Bytes(buf); string(got) != "old" {
		t.Errorf("the reader reads %q while f is rewritten, want old", got)
	}
	res.Done() // as go-fuse does once the reply is sent: Release waits for it
	fileOf(w).Release(as(1))
	fileOf(r).Release(as(2))
	tf.wantContent(t, "f", "new", "after the writer's release")
}

// TestAppendGoesToTheTempsEnd: an O_APPEND write lands at the end of the
// owner's bytes, whatever offset the kernel sends (its idea of the size
// may be another view's).
func TestAppendGoesToTheTempsEnd(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old\n")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_APPEND)
	for _, line := range []string{"a\n", "b\n"} {
		// The kernel thinks the file is the committed four bytes long.
		if n, errno := h.Write(as(1), []byte(line), 4); errno != 0 || int(n) != len(line) {
			t.Fatalf("append %q = %d, %v", line, n, errno)
		}
	}
	h.Release(as(1))
	tf.wantContent(t, "f", "old\na\nb\n", "after two appends")
}

// TestLookupOfAnotherLinkInFlux: a lookup of a hard link the kernel has not
// met, to a file an owner is writing through another name, is not cached
// either: the kernel will find its node in flux under that identity.
func TestLookupOfAnotherLinkInFlux(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.attrTimeout = time.Minute
	tf.write(t, "f", "old content")
	if err := os.Link(filepath.Join(tf.backing, "f"), filepath.Join(tf.backing, "g")); err != nil {
		t.Fatal(err)
	}
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	writeAll(t, h, "new")
	var out fuse.EntryOut
	if _, errno := tf.root.Lookup(as(2), "g", &out); errno != 0 {
		t.Fatal(errno)
	}
	if out.Size != 11 || out.AttrTimeout() != 0 {
		t.Errorf("another owner's lookup of the other link: size %d, cached for %v; want 11, not cached", out.Size, out.AttrTimeout())
	}
	h.Release(as(1))
}

// TestLocksMeetAcrossARetiredNode: record locks taken through a node that
// was retired for a writer (its readers read through the page cache) and
// through the node that replaced it are locks on one file, even after the
// writer's commit replaced the backing file: a reader's shared lock keeps
// the writer's exclusive one out, as SQLite needs.
func TestLocksMeetAcrossARetiredNode(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "db")
	n := tf.lookup(t, "f")
	r, _, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	whole := func(typ uint32) *fuse.FileLock { return &fuse.FileLock{Start: 0, End: 1<<63 - 1, Typ: typ} }
	if errno := n.Setlk(as(2), r, 2, whole(syscall.F_RDLCK), 0); errno != 0 {
		t.Fatalf("the reader's shared lock: %v", errno)
	}
	if _, _, errno := n.Open(as(1), syscall.O_RDWR); errno != syscall.ESTALE {
		t.Fatalf("write open beside a cached reader = %v, want ESTALE (the test needs a retired node)", errno)
	}
	m := tf.lookup(t, "f")
	w, _, errno := m.Open(as(1), syscall.O_RDWR)
	if errno != 0 {
		t.Fatal(errno)
	}
	// A commit replaces the backing file: locks must still meet on the
	// file the first lock was taken on.
	writeAll(t, fileOf(w), "new")
	if errno := fileOf(w).Fsync(as(1), 0); errno != 0 {
		t.Fatal(errno)
	}
	if errno := m.Setlk(as(1), w, 1, whole(syscall.F_WRLCK), 0); errno != syscall.EAGAIN {
		t.Errorf("the writer's exclusive lock beside the reader's shared one = %v, want EAGAIN", errno)
	}
	fileOf(r).Release(as(2))
	if errno := m.Setlk(as(1), w, 1, whole(syscall.F_WRLCK), 0); errno != 0 {
		t.Errorf("the writer's exclusive lock after the reader closed = %v, want it granted", errno)
	}
	fileOf(w).Release(as(1))
}

// TestFailedOpenKeepsContent: the kernel may fail an open after the daemon
// made its handle (a passthrough reader admitted beside it, a signal) and
// then release the handle, with no FLUSH ever: the process never had the
// file, and an O_TRUNC in that open must not empty it.
func TestFailedOpenKeepsContent(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "content")
	h := tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	h.Release(as(1)) // no Flush: the open never reached the process
	tf.wantContent(t, "f", "content", "after the release of a handle whose open failed")
	tf.wantNoTemps(t)
	if !strings.Contains(tf.logs.String(), "failed in the kernel") {
		t.Errorf("log %q does not say why the truncation was not committed", tf.logs.String())
	}

	// A truncation that reached the process (: > f) is committed.
	h = tf.openWrite(t, 1, "f", syscall.O_WRONLY|syscall.O_TRUNC)
	if errno := h.Flush(as(sleeper(t))); errno != 0 { // another process's close: it commits nothing
		t.Fatalf("flush = %v", errno)
	}
	tf.wantContent(t, "f", "content", "after another process's close")
	h.Release(as(1))
	tf.wantContent(t, "f", "", "after the release of a truncating open that was closed")
}

// TestAdmissionIsOneStep: a pending write's handle and a passthrough reader
// never both get into a node, in either order: a writer counted first
// makes the reader read direct; a passthrough reader admitted first sends
// the writer to a new node (ESTALE). Each check and its count are one step
// under the node's opens' lock (nodeopens.Set.AdmitShared, AdmitReader), so no reader slips in between.
func TestAdmissionIsOneStep(t *testing.T) {
	tf := newTestFS(t, func(o *Options) { o.Passthrough = true })
	tf.write(t, "f", "x")

	n := tf.lookup(t, "f")
	w, _, errno := n.Open(as(1), syscall.O_RDWR)
	if errno != 0 {
		t.Fatal(errno)
	}
	r, flags, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 || flags&fuse.FOPEN_PASSTHROUGH != 0 || fileOf(r).(*readHandle).mode == nodeopens.Passthrough {
		t.Errorf("a reader beside a pending write: flags %#x, %v; want it admitted, not passing through", flags, errno)
	}
	fileOf(r).Release(as(2))
	fileOf(w).Release(as(1))

	m := tf.lookup(t, "f")
	r, _, errno = m.Open(as(2), syscall.O_RDONLY)
	if errno != 0 || fileOf(r).(*readHandle).mode != nodeopens.Passthrough {
		t.Fatalf("a reader alone: %v, %v; want it passing through", errno, fileOf(r).(*readHandle).mode)
	}
	if _, _, errno := m.Open(as(1), syscall.O_RDWR); errno != syscall.ESTALE {
		t.Errorf("a writer beside a passthrough reader = %v, want ESTALE", errno)
	}
	if c := m.opens.Counts(); c.Shared != 0 {
		t.Errorf("the refused writer is still counted on the node (%d)", c.Shared)
	}
	fileOf(r).Release(as(2))
}

// TestDirectReadersAcrossVersions: readers that read direct cache nothing,
// so a reader of a newer version joins a node whose older reader is still
// open, without the ESTALE a retire costs.
func TestDirectReadersAcrossVersions(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "v1")
	n := tf.lookup(t, "f")
	n.opens.HoldOff(time.Now().Add(time.Hour)) // readers read direct
	r1, _, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	w, _, errno := n.Open(as(1), syscall.O_WRONLY|syscall.O_TRUNC)
	if errno != 0 {
		t.Fatal(errno)
	}
	writeAll(t, fileOf(w), "v2")
	if errno := fileOf(w).Fsync(as(1), 0); errno != 0 {
		t.Fatal(errno)
	}
	fileOf(w).Release(as(1))
	r2, _, errno := n.Open(as(2), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("a reader of the new version beside a direct reader of the old = %v, want it admitted", errno)
	}
	for _, tc := range []struct {
		h    openFile
		want string
	}{{fileOf(r1), "v1"}, {fileOf(r2), "v2"}} {
		buf := make([]byte, 8)
		res, errno := tc.h.Read(as(2), buf, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		if got, _ := res.Bytes(buf); string(got) != tc.want {
			t.Errorf("reader reads %q, want %q", got, tc.want)
		}
		res.Done()
	}
	fileOf(r1).Release(as(2))
	fileOf(r2).Release(as(2))
}

// TestCatchUpNeedsTheGeneration: a node catches up with a commit's
// replacement only if the file it finds is that replacement, generation
// and all: backing filesystems give a freed inode number to the next new
// file, which must not be taken for it.
func TestCatchUpNeedsTheGeneration(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "x")
	n := tf.lookup(t, "f")
	was := n.FileID()
	tf.write(t, "f.new", "y")
	if err := os.Rename(filepath.Join(tf.backing, "f.new"), filepath.Join(tf.backing, "f")); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	gen, err := dirfd.Statx(tf.rootFd, "f", &st)
	if err != nil {
		t.Fatal(err)
	}
	next := locks.FileID{Key: locks.KeyOf(&st), Gen: gen}
	tf.inos.Succeeded(was, locks.FileID{Key: next.Key, Gen: gen + 1}) // the same number, another file
	if n.catchUp(context.Background(), tf.root, "f", &st) {
		t.Fatal("caught up with a file that only shares the replacement's inode number")
	}
	if n.FileID() != was {
		t.Fatal("a refused catch-up moved the node")
	}
	tf.inos.Succeeded(was, next)
	if !n.catchUp(context.Background(), tf.root, "f", &st) || n.FileID() != next {
		t.Errorf("did not catch up with the replacement: node stands for %v, want %v", n.FileID(), next)
	}
}

// TestOpenOfARenamedOverNodeIsStale: a node whose name a rename replaced
// answers an open or a stat by name with ESTALE, so that the kernel looks
// the name up again: natively the name never goes missing.
func TestOpenOfARenamedOverNodeIsStale(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "old")
	tf.write(t, "g", "new")
	n := tf.lookup(t, "f")
	tf.lookup(t, "g")
	if errno := tf.root.Rename(as(1), "g", tf.root, "f", 0); errno != 0 {
		t.Fatal(errno)
	}
	if _, _, errno := n.Open(as(2), syscall.O_RDONLY); errno != syscall.ESTALE {
		t.Errorf("open of the node renamed over = %v, want ESTALE", errno)
	}
	var out fuse.AttrOut
	if errno := n.Getattr(as(2), nil, &out); errno != syscall.ESTALE {
		t.Errorf("stat of the node renamed over = %v, want ESTALE", errno)
	}
}

// TestCreatedAttributesCached: a file CREATE just made looks the same,
// empty, to every owner, so its entry's attributes may be cached (the
// fstat after open(2) needs no GETATTR); once its creator has written, no
// answer about it is cached. A create asking for set-ID bits makes the
// file without them (hostmode.go), so it is cached like any other.
func TestCreatedAttributesCached(t *testing.T) {
	for _, tc := range []struct {
		mode uint32
		want time.Duration
	}{
		{0o644, time.Minute},
		{0o4755, time.Minute},
		{0o2755, time.Minute},
	} {
		tf := newTestFS(t, nil)
		tf.attrTimeout = time.Minute
		var out fuse.EntryOut
		_, fh, _, errno := tf.root.Create(as(1), "f", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, tc.mode, &out)
		if errno != 0 {
			t.Fatalf("create %#o: %v", tc.mode, errno)
		}
		if out.AttrTimeout() != tc.want {
			t.Errorf("create %#o: attributes cached for %v, want %v", tc.mode, out.AttrTimeout(), tc.want)
		}
		if out.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("create %#o: made with mode %#o, want no set-ID bit", tc.mode, out.Mode&07777)
		}
		h := fh.(*writeHandle)
		writeAll(t, h, "new")
		var attr fuse.AttrOut
		for _, pid := range []uint32{1, 2} {
			if errno := h.node.Getattr(as(pid), h, &attr); errno != 0 || attr.Timeout() != 0 {
				t.Errorf("create %#o, after a write: getattr as %d cached for %v (%v), want not cached", tc.mode, pid, attr.Timeout(), errno)
			}
		}
		h.Release(as(1))
	}
}

// TestOwnReaderOnAnotherNodeShowsTheWrite: an owner's plain reader, opened
// before its write had bytes, on a node other than the write's (the
// write's node was retired since, and the name looked up again), is the
// handle go-fuse lends to the owner's stat by path once the write has
// bytes: the owner sees its own size there too, as through any other
// handle. A view is the file's and the owner's, not the node's (model seed
// 97468532003: stat by path 8 beside fstat 4).
func TestOwnReaderOnAnotherNodeShowsTheWrite(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.attrTimeout = time.Minute
	tf.write(t, "f", "12345678")
	w := tf.openWrite(t, 1, "f", syscall.O_RDWR)
	n := w.node
	if errno := n.retire(); errno != syscall.ESTALE {
		t.Fatalf("retire = %v", errno)
	}
	m := tf.lookup(t, "f")
	if m == n {
		t.Fatal("the lookup after the retirement found the retired node")
	}
	r, _, errno := m.Open(as(1), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("the owner's read open on the new node: %v", errno)
	}
	if _, ok := fileOf(r).(*readHandle); !ok {
		t.Fatalf("the owner's read open with nothing written is a %T, want a plain reader", fileOf(r))
	}
	in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: 4}}
	var out fuse.AttrOut
	if errno := n.Setattr(as(1), w, in, &out); errno != 0 || out.Size != 4 {
		t.Fatalf("ftruncate 4 through the write handle: size %d, %v", out.Size, errno)
	}
	for _, tc := range []struct {
		what string
		pid  uint32
		want uint64
	}{
		{"the writer's stat, its own reader lent", 1, 4},
		{"another owner's stat, the writer's reader lent", 2, 8},
	} {
		var out fuse.AttrOut
		if errno := m.Getattr(as(tc.pid), r, &out); errno != 0 || out.Size != tc.want || out.Timeout() != 0 {
			t.Errorf("%s: size %d, cached for %v, %v; want %d, not cached", tc.what, out.Size, out.Timeout(), errno, tc.want)
		}
	}
	fileOf(r).Release(as(1))
	w.Release(as(1))
	tf.wantContent(t, "f", "1234", "after the writer's release")
}
