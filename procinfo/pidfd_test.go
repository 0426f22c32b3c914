package procinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needPidfd skips the test unless this kernel and /proc let a Resolver use
// pidfds.
func needPidfd(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Skip("no pidfd_open:", err)
	}
	unix.Close(fd)
}

// threadPidfds reports whether pidfds of non-leader threads can be opened
// (Linux 6.9).
func threadPidfds(t *testing.T) bool {
	if probePidfd() != pidfdThread {
		t.Log("no PIDFD_THREAD")
		return false
	}
	return true
}

// lockedThread returns the id of a thread of this process, not its leader,
// that lives until the test ends or exit is called.
func lockedThread(t testing.TB) (tid uint32, exit func()) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	// A goroutine that lands on the main thread keeps it, so the next
	// cannot.
	for {
		tids := make(chan int)
		quit := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			tids <- unix.Gettid()
			select {
			case <-done:
				runtime.UnlockOSThread()
			case <-quit:
				// Exiting locked ends the thread.
			}
		}()
		if tid := <-tids; tid != os.Getpid() {
			return uint32(tid), sync.OnceFunc(func() { close(quit) })
		}
	}
}

// selfOwner returns what this process's owner in mode must be.
func selfOwner(t testing.TB, mode OwnerMode) Owner {
	t.Helper()
	switch mode {
	case OwnerPID:
		return pidOwner(uint64(os.Getpid()))
	case OwnerSession:
		sid, err := unix.Getsid(0)
		if err != nil {
			t.Fatal(err)
		}
		return sessionOwner(uint64(sid))
	case OwnerCgroup:
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		path, err := cgroupPath(b)
		if err != nil {
			t.Fatal(err)
		}
		return Owner("cgroup:" + path)
	}
	t.Fatalf("mode %v", mode)
	return ""
}

// childOwner returns what the owner in mode of child process pid, which
// shares this process's session and cgroup, must be.
func childOwner(t testing.TB, mode OwnerMode, pid int) Owner {
	if mode == OwnerPID {
		return pidOwner(uint64(pid))
	}
	return selfOwner(t, mode)
}

// startChild starts a process that sleeps until killed, which the test's
// end does if the test has not.
func startChild(t testing.TB) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopChild(cmd) })
	return cmd
}

// stopChild kills and reaps cmd; its pid is then free for reuse.
func stopChild(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// cachedFd returns the pidfd cached for pid.
func (r *Resolver) cachedFd(pid uint32) (int, bool) {
	r.fdMu.RLock()
	defer r.fdMu.RUnlock()
	p, ok := r.live[pid]
	if !ok {
		return -1, false
	}
	return p.fd, true
}

func (r *Resolver) liveLen() int {
	r.fdMu.RLock()
	defer r.fdMu.RUnlock()
	return len(r.live)
}

// pidfdCount counts this process's open pidfds.
func pidfdCount(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

var modes = []OwnerMode{OwnerCgroup, OwnerSession, OwnerPID}

// TestPidfdSelf resolves this process and one of its other threads, which
// are one owner in every mode, and checks that a second lookup hits the
// cache.
func TestPidfdSelf(t *testing.T) {
	needPidfd(t)
	tid, _ := lockedThread(t)
	threads := threadPidfds(t)
	ids := []struct {
		name   string
		pid    uint32
		pidfds bool // whether the lookup must take the pidfd path
	}{
		{"leader", uint32(os.Getpid()), true},
		{"thread", tid, threads},
	}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			want := selfOwner(t, mode)
			r := NewResolver(mode, "/proc")
			for _, id := range ids {
				got, err := r.Owner(id.pid)
				if err != nil || got != want {
					t.Fatalf("%s: Owner(%d) = %q, %v; want %q", id.name, id.pid, got, err, want)
				}
				fd, ok := r.cachedFd(id.pid)
				if ok != id.pidfds {
					t.Fatalf("%s: pidfd cached = %v; want %v", id.name, ok, id.pidfds)
				}
				misses := r.misses.Load()
				got, err = r.Owner(id.pid)
				if err != nil || got != want {
					t.Fatalf("%s: second Owner(%d) = %q, %v; want %q", id.name, id.pid, got, err, want)
				}
				if !id.pidfds {
					continue
				}
				if m := r.misses.Load(); m != misses {
					t.Errorf("%s: second lookup missed (misses %d, then %d)", id.name, misses, m)
				}
				if fd2, _ := r.cachedFd(id.pid); fd2 != fd {
					t.Errorf("%s: pidfd %d replaced by %d", id.name, fd, fd2)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if n := r.liveLen(); n != 0 {
				t.Fatalf("%d entries after Close", n)
			}
			// A closed Resolver still answers, without caching.
			if got, err := r.Owner(ids[0].pid); err != nil || got != want || r.liveLen() != 0 {
				t.Errorf("after Close: Owner = %q, %v with %d entries; want %q and none", got, err, r.liveLen(), want)
			}
		})
	}
}

// TestPidfdLeaderOnly: as before Linux 6.9, only a thread-group leader has a
// pidfd, and another thread takes the stat path, to the same owner.
func TestPidfdLeaderOnly(t *testing.T) {
	needPidfd(t)
	tid, _ := lockedThread(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := NewResolver(mode, "/proc")
			defer r.Close()
			r.pidfd = pidfdLeader
			want := selfOwner(t, mode)
			for _, pid := range []uint32{uint32(os.Getpid()), tid} {
				if got, err := r.Owner(pid); err != nil || got != want {
					t.Errorf("Owner(%d) = %q, %v; want %q", pid, got, err, want)
				}
			}
			if _, ok := r.cachedFd(uint32(os.Getpid())); !ok {
				t.Error("the leader has no cached pidfd")
			}
			if _, ok := r.cachedFd(tid); ok {
				t.Error("the thread has a cached pidfd")
			}
		})
	}
}

// TestPidfdExited checks that the entry of a process or thread that has
// exited is never a hit: its pid may be another process's by now.
func TestPidfdExited(t *testing.T) {
	needPidfd(t)
	for _, mode := range modes {
		t.Run(mode.String()+"/process", func(t *testing.T) {
			r := NewResolver(mode, "/proc")
			defer r.Close()
			cmd := startChild(t)
			pid := uint32(cmd.Process.Pid)
			want := childOwner(t, mode, cmd.Process.Pid)
			if got, err := r.Owner(pid); err != nil || got != want {
				t.Fatalf("Owner(child) = %q, %v; want %q", got, err, want)
			}
			if _, ok := r.cachedFd(pid); !ok {
				t.Fatal("child not cached with a pidfd")
			}
			stopChild(cmd)
			got, err := r.Owner(pid)
			if _, ok := r.cachedFd(pid); ok {
				t.Error("the exited child's entry is still cached")
			}
			switch mode {
			case OwnerPID:
				// A vanished thread is its own owner.
				if err != nil || got != want {
					t.Errorf("Owner(exited child) = %q, %v; want %q", got, err, want)
				}
			default:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("Owner(exited child) = %q, %v; want fs.ErrNotExist", got, err)
				}
			}
		})
	}

	// A thread's pidfd (PIDFD_THREAD) tells of the thread's exit although
	// its process lives on.
	t.Run("thread", func(t *testing.T) {
		if !threadPidfds(t) {
			t.Skip("no pidfds of threads")
		}
		r := NewResolver(OwnerPID, "/proc")
		defer r.Close()
		tid, exit := lockedThread(t)
		want := selfOwner(t, OwnerPID)
		if got, err := r.Owner(tid); err != nil || got != want {
			t.Fatalf("Owner(thread) = %q, %v; want %q", got, err, want)
		}
		exit()
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(task); errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the thread did not exit")
			}
		}
		got, err := r.Owner(tid)
		if _, ok := r.cachedFd(tid); ok {
			t.Error("the exited thread's entry is still cached")
		}
		if want := pidOwner(uint64(tid)); err != nil || got != want {
			t.Errorf("Owner(exited thread) = %q, %v; want %q", got, err, want)
		}
	})
}

// TestPidfdExitDuringLookup kills the process between the read of its proc
// files and the check that it lives: the files may be a newcomer's then, so
// nothing is cached and no pidfd is leaked.
func TestPidfdExitDuringLookup(t *testing.T) {
	needPidfd(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			before := pidfdCount(t)
			cmd := startChild(t)
			pid := uint32(cmd.Process.Pid)
			r := NewResolver(mode, "/proc")
			defer r.Close()
			r.afterRead = func(p uint32) {
				if p == pid {
					stopChild(cmd)
				}
			}
			got, err := r.Owner(pid)
			switch mode {
			case OwnerPID:
				if want := pidOwner(uint64(pid)); err != nil || got != want {
					t.Errorf("Owner = %q, %v; want %q", got, err, want)
				}
			default:
				if !errors.Is(err, errExited) || !errors.Is(err, fs.ErrNotExist) || got != "" {
					t.Errorf("Owner = %q, %v; want errExited", got, err)
				}
			}
			if n := r.liveLen(); n != 0 {
				t.Errorf("%d entries cached; want none", n)
			}
			if after := pidfdCount(t); after != before {
				t.Errorf("%d pidfds open, %d before", after, before)
			}
		})
	}
}

// TestPidfdBound checks that the cache holds at most max pidfds, that a full
// cache evicts exited processes first, and that Close closes them all.
func TestPidfdBound(t *testing.T) {
	needPidfd(t)
	before := pidfdCount(t)
	r := NewResolver(OwnerPID, "/proc")
	defer r.Close()
	r.max = 4
	var cmds []*exec.Cmd
	for range 10 {
		cmd := startChild(t)
		cmds = append(cmds, cmd)
		want := pidOwner(uint64(cmd.Process.Pid))
		if got, err := r.Owner(uint32(cmd.Process.Pid)); err != nil || got != want {
			t.Fatalf("Owner(child) = %q, %v; want %q", got, err, want)
		}
		if n := r.liveLen(); n > r.max {
			t.Fatalf("%d entries cached; bound is %d", n, r.max)
		}
	}
	if n := r.liveLen(); n != r.max {
		t.Fatalf("%d entries cached; want %d", n, r.max)
	}

	// Two of the cached processes exit; the next insertion evicts both.
	var cachedCmds []*exec.Cmd
	for _, cmd := range cmds {
		if _, ok := r.cachedFd(uint32(cmd.Process.Pid)); ok {
			cachedCmds = append(cachedCmds, cmd)
		}
	}
	stopChild(cachedCmds[0])
	stopChild(cachedCmds[1])
	cmd := startChild(t)
	if _, err := r.Owner(uint32(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	for i, c := range append(cachedCmds, cmd) {
		_, ok := r.cachedFd(uint32(c.Process.Pid))
		if want := i >= 2; ok != want {
			t.Errorf("after eviction: process %d cached = %v; want %v", c.Process.Pid, ok, want)
		}
	}
	if n := r.liveLen(); n != 3 {
		t.Errorf("%d entries cached after eviction; want 3", n)
	}

	held := pidfdCount(t)
	n := r.liveLen()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := pidfdCount(t); got != held-n {
		t.Errorf("Close left %d pidfds open; want %d", got, held-n)
	}
	for _, c := range append(cmds, cmd) {
		stopChild(c)
	}
	if got := pidfdCount(t); got != before {
		t.Errorf("%d pidfds open at the end, %d at the start", got, before)
	}
}

// TestPidfdConcurrent resolves a mix of live threads and exiting processes
// from many goroutines, with a cache small enough to evict all the time.
func TestPidfdConcurrent(t *testing.T) {
	needPidfd(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			before := pidfdCount(t)
			r := NewResolver(mode, "/proc")
			r.max = 4
			self := selfOwner(t, mode)
			tid1, _ := lockedThread(t)
			tid2, _ := lockedThread(t)
			live := []uint32{uint32(os.Getpid()), tid1, tid2}
			var cmds []*exec.Cmd
			var children []uint32
			wants := make(map[uint32]Owner)
			for range 6 {
				cmd := startChild(t)
				cmds = append(cmds, cmd)
				pid := uint32(cmd.Process.Pid)
				children = append(children, pid)
				wants[pid] = childOwner(t, mode, cmd.Process.Pid)
			}

			// The children die one by one as the lookups go on: the k-th
			// once k/len(cmds) of them are done (or all have ended).
			const goroutines, rounds = 16, 300
			var looked atomic.Int64
			var lookersDone atomic.Bool
			var killer sync.WaitGroup
			killer.Go(func() {
				for k, cmd := range cmds {
					for looked.Load() < int64(k*goroutines*rounds/len(cmds)) && !lookersDone.Load() {
						runtime.Gosched()
					}
					stopChild(cmd)
				}
			})
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range rounds {
						looked.Add(1)
						if (g+i)%2 == 0 {
							pid := live[(g+i)%len(live)]
							if got, err := r.Owner(pid); err != nil || got != self {
								t.Errorf("Owner(%d) = %q, %v; want %q", pid, got, err, self)
								return
							}
							continue
						}
						pid := children[(g+i)%len(children)]
						got, err := r.Owner(pid)
						if !childOK(mode, got, err, wants[pid]) {
							t.Errorf("Owner(child %d) = %q, %v; want %q or fs.ErrNotExist", pid, got, err, wants[pid])
							return
						}
					}
				})
			}
			wg.Wait()
			lookersDone.Store(true)
			killer.Wait()
			if n := r.liveLen(); n > r.max {
				t.Errorf("%d entries cached; bound is %d", n, r.max)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := pidfdCount(t); got != before {
				t.Errorf("%d pidfds open after Close, %d before", got, before)
			}
		})
	}
}

// childOK reports whether got and err may be the owner in mode of a child
// that is being killed.
func childOK(mode OwnerMode, got Owner, err error, want Owner) bool {
	switch {
	case got == want:
		return true
	case mode == OwnerPID:
		return false // even a vanished thread has an owner
	case errors.Is(err, fs.ErrNotExist):
		return true
	}
	// On a cgroup v1 hierarchy an exiting process shows the root cgroup
	// from when it starts to exit, before its pidfd reports the exit.
	return mode == OwnerCgroup && got == "cgroup:/"
}

// TestPidfdSessionFixed checks the documented semantics: a process that
// calls setsid(2) after its first lookup keeps the session it had then.
func TestPidfdSessionFixed(t *testing.T) {
	needPidfd(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip(err)
	}
	// The child is not a process-group leader, so setsid(1) calls setsid(2)
	// in place, then execs sleep, keeping the pid.
	cmd := exec.Command("sh", "-c", "read x; exec setsid sleep 60")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopChild(cmd) })
	pid := uint32(cmd.Process.Pid)

	r := NewResolver(OwnerSession, "/proc")
	defer r.Close()
	want := selfOwner(t, OwnerSession)
	if got, err := r.Owner(pid); err != nil || got != want {
		t.Fatalf("Owner(child) = %q, %v; want %q", got, err, want)
	}
	in.Write([]byte("\n"))
	newSession := sessionOwner(uint64(pid))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && sessionOwner(st.session) == newSession {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not call setsid: %v", err)
		}
	}
	if got, err := r.Owner(pid); err != nil || got != want {
		t.Errorf("after setsid: Owner(child) = %q, %v; want the first owner %q", got, err, want)
	}
	fresh := NewResolver(OwnerSession, "/proc")
	defer fresh.Close()
	if got, err := fresh.Owner(pid); err != nil || got != newSession {
		t.Errorf("fresh Resolver: Owner(child) = %q, %v; want %q", got, err, newSession)
	}
}

// BenchmarkOwnerHit measures a cache hit in cgroup mode, with a pidfd and
// with the stat path that serves kernels without pidfds, for this process
// and for a single-threaded child (the stat file of a process with many
// threads costs more to make).
func BenchmarkOwnerHit(b *testing.B) {
	needPidfd(b)
	child := startChild(b)
	for _, target := range []struct {
		name string
		pid  uint32
	}{
		{"self", uint32(os.Getpid())},
		{"child", uint32(child.Process.Pid)},
	} {
		for _, path := range []string{"pidfd", "stat"} {
			r := NewResolver(OwnerCgroup, "/proc")
			if path == "stat" {
				r.pidfd = pidfdNone
			}
			if _, err := r.Owner(target.pid); err != nil {
				b.Fatal(err)
			}
			b.Run(target.name+"/"+path, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := r.Owner(target.pid); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(target.name+"/"+path+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := r.Owner(target.pid); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			if path == "pidfd" && r.misses.Load() != 1 {
				b.Errorf("%s: %d misses; want 1", target.name, r.misses.Load())
			}
			r.Close()
		}
	}
}
