package procinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseOwnerMode(t *testing.T) {
	tests := []struct {
		in      string
		want    OwnerMode
		wantErr bool
	}{
		{"cgroup", OwnerCgroup, false},
		{"session", OwnerSession, false},
		{"pid", OwnerPID, false},
		{"", 0, true},
		{"PID", 0, true},
		{"uid", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseOwnerMode(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseOwnerMode(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("%v.String() = %q; want %q", got, got.String(), tt.in)
		}
	}
	var zero OwnerMode
	if zero != OwnerCgroup {
		t.Error("the zero OwnerMode is not OwnerCgroup")
	}
}

// statLine returns a /proc/PID/stat line with the given comm, session and
// start time; the other fields are plausible filler.
func statLine(pid int, comm string, session, start uint64) string {
	// Fields 3..22: state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime, then a few more.
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 %d 3133440 383 18446744073709551615\n",
		pid, comm, pid, session, start)
}

// fakeProc writes a fake /proc/PID in root.
func fakeProc(t *testing.T, root string, pid int, stat, cgroup string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
}

const hybridCgroup = `12:pids:/user.slice/user-1000.slice/session-2.scope
4:memory:/user.slice/user-1000.slice/session-2.scope
1:name=systemd:/user.slice/user-1000.slice/session-2.scope
0::/user.slice/user-1000.slice/session-2.scope
`

func TestResolverFake(t *testing.T) {
	tests := []struct {
		name   string
		mode   OwnerMode
		pid    uint32
		comm   string
		cgroup string
		want   Owner
	}{
		{"cgroup v2", OwnerCgroup, 100, "bash", "0::/user.slice/agent-1.scope\n", "cgroup:/user.slice/agent-1.scope"},
		{"cgroup v2 root", OwnerCgroup, 100, "bash", "0::/\n", "cgroup:/"},
		{"cgroup v2 path with colon", OwnerCgroup, 100, "bash", "0::/a:b\n", "cgroup:/a:b"},
		{"cgroup hybrid", OwnerCgroup, 100, "bash", hybridCgroup, "cgroup:/user.slice/user-1000.slice/session-2.scope"},
		{"cgroup hybrid with root v2", OwnerCgroup, 100, "bash",
			"2:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n", "cgroup:/docker/abc"},
		{"cgroup v1 systemd", OwnerCgroup, 100, "bash",
			"3:cpu,cpuacct:/cpu\n2:memory:/mem\n1:name=systemd:/sys\n", "cgroup:/sys"},
		{"cgroup v1 no systemd", OwnerCgroup, 100, "bash",
			"3:cpu,cpuacct:/\n2:memory:/mem\n1:pids:/pids\n", "cgroup:/mem"},
		{"session", OwnerSession, 100, "bash", "", "session:4242"},
		{"session, comm with ') (' and spaces", OwnerSession, 100, "a) (b c) 7 8", "", "session:4242"},
		{"cgroup, comm with ') (' and spaces", OwnerCgroup, 100, ") (x) ) ", "0::/c\n", "cgroup:/c"},
		{"session, comm with a newline", OwnerSession, 100, "a\n(b)", "", "session:4242"},
		{"pid", OwnerPID, 100, "bash", "", "pid:100"},
		{"pid reads nothing", OwnerPID, 999, "", "", "pid:999"},
		{"kernel", OwnerCgroup, 0, "", "", KernelOwner},
		{"kernel, session mode", OwnerSession, 0, "", "", KernelOwner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			fakeProc(t, root, 100, statLine(100, tt.comm, 4242, 555), tt.cgroup)
			r := NewResolver(tt.mode, root)
			got, err := r.Owner(tt.pid)
			if err != nil || got != tt.want {
				t.Errorf("Owner(%d) = %q, %v; want %q", tt.pid, got, err, tt.want)
			}
		})
	}
}

func TestResolverErrors(t *testing.T) {
	tests := []struct {
		name     string
		mode     OwnerMode
		stat     string
		cgroup   string
		notExist bool // the error must wrap fs.ErrNotExist
	}{
		{"vanished, cgroup", OwnerCgroup, "", "", true},
		{"vanished, session", OwnerSession, "", "", true},
		{"stat without comm", OwnerSession, "100 bash S 1 2 3\n", "", false},
		{"stat truncated", OwnerCgroup, "100 (bash) S 1 100 4242 0\n", "0::/\n", false},
		{"stat session not a number", OwnerSession, "100 (bash) S 1 100 x 0 -1 4 1 0 0 0 0 0 0 0 20 0 1 0 5 1 1\n", "", false},
		{"cgroup empty", OwnerCgroup, statLine(100, "bash", 1, 1), "", false},
		{"cgroup malformed", OwnerCgroup, statLine(100, "bash", 1, 1), "garbage\n", false},
		{"cgroup relative path", OwnerCgroup, statLine(100, "bash", 1, 1), "0::user.slice\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.stat != "" {
				fakeProc(t, root, 100, tt.stat, tt.cgroup)
			}
			r := NewResolver(tt.mode, root)
			got, err := r.Owner(100)
			if err == nil {
				t.Fatalf("Owner = %q; want an error", got)
			}
			if got != "" {
				t.Errorf("Owner = %q with error; want empty", got)
			}
			if tt.notExist != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v; want %v", err, !tt.notExist, tt.notExist)
			}
		})
	}
}

// TestResolverCache checks that the cgroup lookup is cached by pid and start
// time: the same process is not looked up again, and a reused pid is.
func TestResolverCache(t *testing.T) {
	root := t.TempDir()
	r := NewResolver(OwnerCgroup, root)
	steps := []struct {
		name   string
		start  uint64
		cgroup string
		want   Owner
	}{
		{"first lookup", 100, "0::/old\n", "cgroup:/old"},
		{"same process is cached", 100, "0::/moved\n", "cgroup:/old"},
		{"reused pid is looked up", 200, "0::/new\n", "cgroup:/new"},
		{"reused pid is cached", 200, "0::/newer\n", "cgroup:/new"},
	}
	for _, s := range steps {
		fakeProc(t, root, 7, statLine(7, "sh", 1, s.start), s.cgroup)
		got, err := r.Owner(7)
		if err != nil || got != s.want {
			t.Errorf("%s: Owner = %q, %v; want %q", s.name, got, err, s.want)
		}
	}

	// The process vanishes: its cached owner must not be returned.
	if err := os.RemoveAll(filepath.Join(root, "7")); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Owner(7); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vanished: Owner = %q, %v; want fs.ErrNotExist", got, err)
	}
}

func TestResolverCacheBound(t *testing.T) {
	root := t.TempDir()
	r := NewResolver(OwnerCgroup, root)
	r.max = 4
	for start := range uint64(20) {
		fakeProc(t, root, 7, statLine(7, "sh", 1, start), fmt.Sprintf("0::/c%d\n", start))
		want := Owner(fmt.Sprintf("cgroup:/c%d", start))
		if got, err := r.Owner(7); err != nil || got != want {
			t.Fatalf("start %d: Owner = %q, %v; want %q", start, got, err, want)
		}
		r.mu.Lock()
		n := len(r.cache)
		r.mu.Unlock()
		if n > r.max {
			t.Fatalf("cache holds %d entries; bound is %d", n, r.max)
		}
	}
}

func TestResolverConcurrent(t *testing.T) {
	root := t.TempDir()
	for pid := 1; pid <= 8; pid++ {
		fakeProc(t, root, pid, statLine(pid, "w", 1, 9), fmt.Sprintf("0::/g%d\n", pid%3))
	}
	r := NewResolver(OwnerCgroup, root)
	r.max = 4 // force evictions under contention
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				pid := uint32((g+i)%8 + 1)
				got, err := r.Owner(pid)
				if want := Owner(fmt.Sprintf("cgroup:/g%d", pid%3)); err != nil || got != want {
					t.Errorf("Owner(%d) = %q, %v; want %q", pid, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestResolverLongStatus: pid mode finds Tgid in a status file longer than
// any buffer, as a Groups line with hundreds of groups makes it.
func TestResolverLongStatus(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 100, statLine(100, "w", 1, 9), "0::/\n")
	groups := strings.Repeat(" 1000000", 2000)
	status := "Name:\tw\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t100\nGroups:" + groups + "\n"
	if err := os.WriteFile(filepath.Join(root, "100", "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(OwnerPID, root)
	if got, err := r.Owner(100); err != nil || got != "pid:42" {
		t.Errorf("Owner = %q, %v; want %q", got, err, "pid:42")
	}
}

// TestResolverSelf reads the real /proc for this test process.
func TestResolverSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	pid := os.Getpid()
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode  OwnerMode
		check func(Owner) bool
		want  string
	}{
		{OwnerPID, func(o Owner) bool { return o == Owner("pid:"+strconv.Itoa(pid)) }, "pid:" + strconv.Itoa(pid)},
		{OwnerSession, func(o Owner) bool { return o == Owner("session:"+strconv.Itoa(sid)) }, "session:" + strconv.Itoa(sid)},
		{OwnerCgroup, func(o Owner) bool { return strings.HasPrefix(string(o), "cgroup:/") }, "cgroup:/..."},
	}
	for _, tt := range tests {
		for _, path := range []string{"pidfd", "stat"} {
			t.Run(tt.mode.String()+"/"+path, func(t *testing.T) {
				r := NewResolver(tt.mode, "/proc")
				defer r.Close()
				if path == "stat" {
					r.pidfd = pidfdNone
				}
				got, err := r.Owner(uint32(pid))
				if err != nil || !tt.check(got) {
					t.Fatalf("Owner(self) = %q, %v; want %s", got, err, tt.want)
				}
				again, err := r.Owner(uint32(pid))
				if err != nil || again != got {
					t.Errorf("second Owner(self) = %q, %v; want %q", again, err, got)
				}
				t.Logf("%s owner of this process: %s", tt.mode, got)
			})
		}
	}
}

func BenchmarkResolverSelf(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("no /proc:", err)
	}
	for _, mode := range []OwnerMode{OwnerCgroup, OwnerSession, OwnerPID} {
		b.Run(mode.String(), func(b *testing.B) {
			r := NewResolver(mode, "/proc")
			pid := uint32(os.Getpid())
			for b.Loop() {
				if _, err := r.Owner(pid); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzParse checks that no stat or cgroup file, however odd, panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(statLine(1, "a) (b", 2, 3)))
	f.Add([]byte(hybridCgroup))
	f.Add([]byte("1 () 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err != nil && st != (stat{}) {
			t.Errorf("parseStat returned %+v with error %v", st, err)
		}
		p, err := cgroupPath(b)
		if err == nil && !strings.HasPrefix(p, "/") {
			t.Errorf("cgroupPath = %q; want an absolute path", p)
		}
	})
}

// TestPIDModeNamesTheProcess: the kernel names the calling thread; in pid
// mode all threads of a process are one owner, the process.
func TestPIDModeNamesTheProcess(t *testing.T) {
	r := NewResolver(OwnerPID, "/proc")
	want := Owner(fmt.Sprintf("pid:%d", os.Getpid()))
	tids := make(chan int, 2)
	for range 2 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- unix.Gettid()
		}()
	}
	for range 2 {
		tid := <-tids
		got, err := r.Owner(uint32(tid))
		if err != nil || got != want {
			t.Errorf("Owner(tid %d) = %q, %v; want %q", tid, got, err, want)
		}
	}
}

func TestIsThreadOf(t *testing.T) {
	r := NewResolver(OwnerPID, "/proc")
	pid := uint32(os.Getpid())
	tids := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
	}()
	tid := uint32(<-tids)
	tests := []struct {
		tgid, tid uint32
		want      bool
	}{
		{pid, pid, true},
		{pid, tid, true},
		{pid, 1, false},
		{1, tid, false},
		{0, tid, false},
		{pid, 0, false},
	}
	for _, tt := range tests {
		if got := r.IsThreadOf(tt.tgid, tt.tid); got != tt.want {
			t.Errorf("IsThreadOf(%d, %d) = %v, want %v", tt.tgid, tt.tid, got, tt.want)
		}
	}
}

// TestThreadGroup: a thread of this process other than its first names
// this process; the process names itself; 0 is 0.
func TestThreadGroup(t *testing.T) {
	tids := make(chan int)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // a thread of its own, kept until released
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		<-release
	}()
	tid := <-tids
	defer close(release)
	pid := uint32(os.Getpid())
	for _, tc := range []struct {
		tid, want uint32
	}{{uint32(tid), pid}, {pid, pid}, {0, 0}} {
		if got := ThreadGroup(tc.tid); got != tc.want {
			t.Errorf("ThreadGroup(%d) = %d, want %d", tc.tid, got, tc.want)
		}
	}
}

func TestPidOf(t *testing.T) {
	for _, c := range []struct {
		o    Owner
		want uint32
	}{
		{"pid:12", 12},
		{"pid:4194304", 4194304},
		{"session:12", 7},
		{"cgroup:/a/b", 7},
		{"pid:", 7},
		{"pid:x1", 7},
		{"pid:-1", 7},
		{"pid:4294967296", 7}, // past 32 bits
		{"", 7},
	} {
		if got := pidOf(c.o, 7); got != c.want {
			t.Errorf("pidOf(%q, 7) = %d, want %d", c.o, got, c.want)
		}
	}
}
