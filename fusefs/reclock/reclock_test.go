package reclock

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
)

// openFile makes a file in a temp directory and returns an fd of it, to
// stand for the handle a first lock is taken through.
func openFile(t *testing.T) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func whole(typ int16) syscall.Flock_t { return syscall.Flock_t{Type: typ} }

// TestLockersConflict: each locker's fd is a lock identity of its own, as
// each process is natively: two lockers' write locks conflict, a locker's
// own locks do not, and a dropped locker's locks go with its fd.
func TestLockersConflict(t *testing.T) {
	src := openFile(t)
	var s Set
	ctx := context.Background()
	fd1, opened, errno := s.fd(src, 1, "a")
	if errno != 0 || opened != 2 {
		t.Fatalf("first locker: opened %d, %v; want the anchor and its fd", opened, errno)
	}
	fd2, opened, errno := s.fd(src, 2, "b")
	if errno != 0 || opened != 1 {
		t.Fatalf("second locker: opened %d, %v; want its fd only", opened, errno)
	}
	if again, opened, _ := s.fd(src, 1, "a"); again != fd1 || opened != 0 {
		t.Errorf("locker 1 again: fd %d (opened %d), want %d", again, opened, fd1)
	}
	steps := []struct {
		name string
		do   func() syscall.Errno
		want syscall.Errno
	}{
		{"1 write-locks", func() syscall.Errno { return Lock(ctx, fd1, whole(syscall.F_WRLCK), false) }, 0},
		{"1 again, now a read lock", func() syscall.Errno { return Lock(ctx, fd1, whole(syscall.F_RDLCK), false) }, 0},
		{"2 reads beside", func() syscall.Errno { return Lock(ctx, fd2, whole(syscall.F_RDLCK), false) }, 0},
		{"2 conflicts", func() syscall.Errno { return Lock(ctx, fd2, whole(syscall.F_WRLCK), false) }, syscall.EAGAIN},
		{"2 flocks beside", func() syscall.Errno { return Flock(ctx, fd2, syscall.F_WRLCK, false) }, 0},
		{"1 flock conflicts", func() syscall.Errno { return Flock(ctx, fd1, syscall.F_RDLCK, false) }, syscall.EWOULDBLOCK},
		{"flock of no type", func() syscall.Errno { return Flock(ctx, fd1, 7, false) }, syscall.EINVAL},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Errorf("%s: %v, want %v", st.name, got, st.want)
		}
	}
	flk := whole(syscall.F_WRLCK)
	if errno := Test(fd2, &flk); errno != 0 || flk.Type != syscall.F_RDLCK {
		t.Errorf("2 tests: %v, type %d; want locker 1's read lock", errno, flk.Type)
	}
	if cs := s.drop(1); len(cs) != 1 || cs[0] != (charged{"a", 1}) {
		t.Errorf("drop 1 released %v, want its fd", cs)
	}
	if errno := Lock(ctx, fd2, whole(syscall.F_WRLCK), false); errno != 0 {
		t.Errorf("2 after 1 dropped: %v", errno)
	}
	if cs := s.drop(2); len(cs) != 2 || cs[0] != (charged{"b", 1}) || cs[1] != (charged{"a", 1}) {
		t.Errorf("drop 2 released %v, want its fd and the anchor (a's)", cs)
	}
	if cs := s.drop(2); cs != nil {
		t.Errorf("drop 2 again released %v", cs)
	}
}

// TestLockWaits: a waiting lock is taken once the holder lets go, and gives
// up with EINTR when its caller does.
func TestLockWaits(t *testing.T) {
	src := openFile(t)
	var s Set
	fd1, _, _ := s.fd(src, 1, "")
	fd2, _, _ := s.fd(src, 2, "")
	ctx := context.Background()
	if errno := Lock(ctx, fd1, whole(syscall.F_WRLCK), false); errno != 0 {
		t.Fatal(errno)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if errno := Lock(short, fd2, whole(syscall.F_WRLCK), true); errno != syscall.EINTR {
		t.Errorf("wait given up: %v, want EINTR", errno)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		Lock(ctx, fd1, whole(syscall.F_UNLCK), false)
	}()
	if errno := Lock(ctx, fd2, whole(syscall.F_WRLCK), true); errno != 0 {
		t.Errorf("wait: %v", errno)
	}
	if cs := s.closeAll(); len(cs) != 3 {
		t.Errorf("closeAll released %v, want two fds and the anchor", cs)
	}
}

// released records the charges given back (Heirs.Charges).
type released map[locks.Owner]int

func (r released) Release(o locks.Owner, n int) { r[o] += n }

// TestHeirs: a node's set is made at its first lock, a retired node's set
// goes to the nodes born as its file, and only the last node sharing a set
// closes its fds, giving their charges back.
func TestHeirs(t *testing.T) {
	src := openFile(t)
	back := released{}
	h := Heirs{Charges: back}
	withSrc := func(fn func(int) syscall.Errno) syscall.Errno { return fn(src) }
	charges := 0
	chargeA := func() (locks.Owner, syscall.Errno) { charges++; return "a", 0 }
	k, other := locks.Key{Dev: 1, Ino: 2}, locks.Key{Dev: 1, Ino: 3}
	old, heir, another := &Place{Born: k}, &Place{Born: k}, &Place{Born: other}
	fd, errno := h.Fd(old, 1, withSrc, chargeA)
	if errno != 0 {
		t.Fatal(errno)
	}
	if again, _ := h.Fd(old, 1, withSrc, chargeA); again != fd || charges != 1 {
		t.Errorf("locker 1 again: fd %d, %d charges; want %d, one charge", again, charges, fd)
	}
	if h.Of(another) == h.Of(old) {
		t.Fatal("a node of another file shares the set")
	}
	h.Bequeath(old, k)
	if h.Of(heir) != h.Of(old) {
		t.Fatal("the node born as the retired node's file has a set of its own")
	}
	if got, _ := h.Fd(heir, 1, withSrc, chargeA); got != fd {
		t.Errorf("the heir's locker 1 has fd %d, want the retired node's %d", got, fd)
	}
	if _, errno := h.Fd(heir, 2, withSrc, func() (locks.Owner, syscall.Errno) { return "b", syscall.ENOLCK }); errno != syscall.ENOLCK {
		t.Errorf("a refused charge: %v, want ENOLCK", errno)
	}
	h.Forget(old)
	if back["a"] != 0 {
		t.Errorf("forget of one of two nodes released %v", back)
	}
	h.Forget(heir)
	if back["a"] != LockerFds {
		t.Errorf("forget of the last node released %v, want a's fd and the anchor", back)
	}
	if h.Of(&Place{Born: k}) == h.Of(old) {
		t.Error("a forgotten set is still handed on")
	}
	h.Forget(another)
	h.Drop(&Place{Born: other}, 1) // no set: nothing to drop
}

// TestSetlk: the kernel's requests, as go-fuse hands them over: a flock
// (FUSE_LK_FLOCK) and a record lock of one locker, each met by another
// locker's GETLK or SETLK.
func TestSetlk(t *testing.T) {
	src := openFile(t)
	var s Set
	ctx := context.Background()
	fd1, _, _ := s.fd(src, 1, "")
	fd2, _, _ := s.fd(src, 2, "")
	defer s.closeAll()
	wr := &fuse.FileLock{Start: 0, End: 10, Typ: syscall.F_WRLCK}
	if errno := Setlk(ctx, fd1, wr, 0, false); errno != 0 {
		t.Fatalf("record lock: %v", errno)
	}
	var out fuse.FileLock
	if errno := Getlk(fd2, &fuse.FileLock{Start: 5, End: 6, Typ: syscall.F_RDLCK}, &out); errno != 0 || out.Typ != syscall.F_WRLCK {
		t.Errorf("getlk: %v, type %d; want locker 1's write lock", errno, out.Typ)
	}
	if errno := Setlk(ctx, fd2, wr, 0, false); errno != syscall.EAGAIN {
		t.Errorf("a conflicting record lock: %v, want EAGAIN", errno)
	}
	if errno := Setlk(ctx, fd2, wr, fuse.FUSE_LK_FLOCK, false); errno != 0 {
		t.Errorf("flock beside a record lock: %v", errno)
	}
	if errno := Setlk(ctx, fd1, wr, fuse.FUSE_LK_FLOCK, false); errno != syscall.EWOULDBLOCK {
		t.Errorf("a conflicting flock: %v, want EWOULDBLOCK", errno)
	}
}
