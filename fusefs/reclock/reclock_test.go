package reclock

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
	fd1, opened, errno := s.Fd(src, 1, "a")
	if errno != 0 || opened != 2 {
		t.Fatalf("first locker: opened %d, %v; want the anchor and its fd", opened, errno)
	}
	fd2, opened, errno := s.Fd(src, 2, "b")
	if errno != 0 || opened != 1 {
		t.Fatalf("second locker: opened %d, %v; want its fd only", opened, errno)
	}
	if again, opened, _ := s.Fd(src, 1, "a"); again != fd1 || opened != 0 {
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
	if cs := s.Drop(1); len(cs) != 1 || cs[0] != (Charge{"a", 1}) {
		t.Errorf("drop 1 released %v, want its fd", cs)
	}
	if errno := Lock(ctx, fd2, whole(syscall.F_WRLCK), false); errno != 0 {
		t.Errorf("2 after 1 dropped: %v", errno)
	}
	if cs := s.Drop(2); len(cs) != 2 || cs[0] != (Charge{"b", 1}) || cs[1] != (Charge{"a", 1}) {
		t.Errorf("drop 2 released %v, want its fd and the anchor (a's)", cs)
	}
	if cs := s.Drop(2); cs != nil {
		t.Errorf("drop 2 again released %v", cs)
	}
}

// TestLockWaits: a waiting lock is taken once the holder lets go, and gives
// up with EINTR when its caller does.
func TestLockWaits(t *testing.T) {
	src := openFile(t)
	var s Set
	fd1, _, _ := s.Fd(src, 1, "")
	fd2, _, _ := s.Fd(src, 2, "")
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

// TestHeirs: a retired node's set goes to the nodes born as its file, and
// only the last node sharing a set closes its fds.
func TestHeirs(t *testing.T) {
	src := openFile(t)
	var h Heirs
	k, other := locks.Key{Dev: 1, Ino: 2}, locks.Key{Dev: 1, Ino: 3}
	old := h.Of(k)
	if _, _, errno := old.Fd(src, 1, "a"); errno != 0 {
		t.Fatal(errno)
	}
	if h.Of(other) == old {
		t.Fatal("a node of another file shares the set")
	}
	h.Bequeath(k, old)
	heir := h.Of(k)
	if heir != old {
		t.Fatal("the node born as the retired node's file has a set of its own")
	}
	if cs := h.Forget(old); cs != nil {
		t.Errorf("forget of one of two nodes released %v", cs)
	}
	if _, ok := heir.Has(1); !ok {
		t.Error("the heir lost locker 1's fd")
	}
	if cs := h.Forget(heir); len(cs) != 2 {
		t.Errorf("forget of the last node released %v, want the fd and the anchor", cs)
	}
	if h.Of(k) == old {
		t.Error("a forgotten set is still handed on")
	}
}
