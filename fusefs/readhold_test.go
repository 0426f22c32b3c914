package fusefs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// seekable is the method go-fuse's splice takes a read's fd from
// (fusefs/readhold's test checks go-fuse still has it).
type seekable interface {
	Seekable() (fd uintptr, off int64, sz int)
}

// TestReleaseWaitsForRead forces the interleaving go-fuse allows: Read
// returns a result that reads the handle's fd later (splice or pread, when
// the reply is sent), and Release comes in between. Release must wait
// for the result's Done, and the result must still read the file, not a
// closed descriptor nor another file given its number.
func TestReleaseWaitsForRead(t *testing.T) {
	for name, want := range map[string]string{"f": "*fusefs.readHandle", "f.db": "*fusefs.inPlaceHandle"} {
		t.Run(name, func(t *testing.T) {
			tf := newTestFS(t, nil)
			tf.write(t, name, "the file's bytes")
			tf.write(t, "decoy", "DECOY DECOY DECOY")
			fh, _, errno := tf.lookup(t, name).Open(as(1), syscall.O_RDONLY)
			if errno != 0 {
				t.Fatal(errno)
			}
			h := fileOf(fh)
			if got := fmt.Sprintf("%T", h); got != want {
				t.Fatalf("open of %s made a %s, want a %s", name, got, want)
			}
			res, errno := h.Read(as(1), make([]byte, 64), 0)
			if errno != 0 {
				t.Fatal(errno)
			}
			sk, ok := res.(seekable)
			if !ok {
				t.Fatalf("a small read answers %T: not spliced", res)
			}
			released := make(chan syscall.Errno, 1)
			go func() { released <- h.Release(as(1)) }()
			select {
			case errno := <-released:
				t.Errorf("Release returned (%v) while go-fuse still reads the fd", errno)
				released <- errno
			case <-time.After(100 * time.Millisecond):
			}
			// Whatever opens now may be given a number the release freed.
			for range 4 {
				d, err := os.Open(filepath.Join(tf.backing, "decoy"))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
			}
			fd, off, sz := sk.Seekable()
			buf := make([]byte, sz)
			n, err := unix.Pread(int(fd), buf, off)
			if err != nil || string(buf[:n]) != "the file's bytes" {
				t.Errorf("the spliced read got %q, %v; want the file's bytes", buf[:max(n, 0)], err)
			}
			if got, st := res.Bytes(make([]byte, 64)); !st.Ok() || string(got) != "the file's bytes" {
				t.Errorf("the read's Bytes = %q, %v; want the file's bytes", got, st)
			}
			res.Done()
			select {
			case errno := <-released:
				if errno != 0 {
					t.Errorf("Release = %v", errno)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Release still waits after the read's Done")
			}
		})
	}
}

// TestReadHoldEnds: every read that go-fuse will not call Done for holds
// nothing, so that Release does not wait for it: a read that fails, one
// read into the daemon's buffer, one of no bytes (go-fuse writes a reply of
// no payload without Done: fuse/fusefd_linux.go), and a read after Release.
func TestReadHoldEnds(t *testing.T) {
	tf := newTestFS(t, nil)
	tf.write(t, "f", "bytes")
	fh, _, errno := tf.lookup(t, "f").Open(as(1), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fileOf(fh)
	if _, errno := h.Read(as(1), make([]byte, 0), 0); errno != 0 {
		t.Fatalf("read of no bytes: %v", errno)
	}
	big := make([]byte, 8<<20) // past a pipe: read into buf
	if _, errno := h.Read(as(1), big, -1); errno != syscall.EINVAL {
		t.Fatalf("read at offset -1 = %v, want EINVAL", errno)
	}
	if res, errno := h.Read(as(1), big, 0); errno != 0 {
		t.Fatalf("large read: %v", errno)
	} else if got, _ := res.Bytes(nil); string(got) != "bytes" {
		t.Fatalf("large read = %q", got)
	}
	released := make(chan syscall.Errno, 1)
	go func() { released <- h.Release(as(1)) }()
	select {
	case errno := <-released:
		if errno != 0 {
			t.Fatalf("Release = %v", errno)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release waits for a read that holds nothing")
	}
	if res, errno := h.Read(as(1), make([]byte, 64), 0); errno != syscall.EBADF {
		t.Errorf("read after Release = %v, %v; want EBADF", res, errno)
	}
}
