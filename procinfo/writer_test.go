package procinfo

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWriterStateFromProc(t *testing.T) {
	stat := func(state string) []byte {
		return []byte("4242 (a (b) c) " + state + " 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0")
	}
	for _, tc := range []struct {
		name  string
		stat  []byte
		wchan string
		want  WriterState
	}{
		{"running between two requests", stat("R"), "0", WriterBusy},
		{"waiting for its next answer", stat("S"), "request_wait_answer", WriterOnFUSE},
		{"a killable wait for an answer", stat("D"), "request_wait_answer", WriterOnFUSE},
		{"an inlined fuse wait", stat("S"), "fuse_simple_request", WriterOnFUSE},
		{"a page of its buffer read in", stat("D"), "folio_wait_bit_common", WriterBusy},
		{"asleep on a futex", stat("S"), "futex_wait_queue", WriterIdle},
		{"asleep, not traceable", stat("S"), "0", WriterUnknown},
		{"stopped", stat("T"), "do_signal_stop", WriterUnknown},
		{"a zombie", stat("Z"), "0", WriterGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := writerState(tc.stat, []byte(tc.wchan+"\n"))
			if err != nil || got != tc.want {
				t.Errorf("writerState(%q, %q) = %v, %v; want %v", tc.stat, tc.wchan, got, err, tc.want)
			}
		})
	}
	if _, err := writerState([]byte("no comm here"), []byte("0")); err == nil {
		t.Error("a stat line without (comm) was accepted")
	}
}

// TestWriterStateOfRealThreads reads real threads: a child asleep on a
// pipe is idle, this test's own running thread is busy, and a reaped
// child is gone.
func TestWriterStateOfRealThreads(t *testing.T) {
	r := NewResolver(OwnerCgroup, "/proc")
	self, err := r.WriterState(uint32(unix.Gettid()))
	if err != nil || self.State != WriterBusy {
		t.Errorf("this running thread: %v, %v; want busy", self, err)
	}
	cmd := exec.Command("sh", "-c", "read x")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	// Wait until the shell sleeps in read(2) on its pipe, as its wait
	// channel says.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/wchan")
		if strings.Contains(string(b), "pipe_read") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell never slept in pipe_read (wchan %q)", b)
		}
	}
	if got, err := r.WriterState(pid); err != nil || got.State != WriterIdle {
		t.Errorf("a shell reading its stdin: %v, %v; want idle", got, err)
	}
	w.Close()
	cmd.Wait()
	if got, err := r.WriterState(pid); err != nil || got.State != WriterGone {
		t.Errorf("a reaped child: %v, %v; want gone", got, err)
	}
}

// TestWriterUserTicks: a thread's user time, as WriterState reads it, grows
// while it runs its own code and not while it sleeps.
func TestWriterUserTicks(t *testing.T) {
	r := NewResolver(OwnerCgroup, "/proc")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := uint32(unix.Gettid())
	before, err := r.WriterState(tid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin in user code until the tick counter moves (a tick is 10 ms).
	x := 0
	for deadline := time.Now().Add(30 * time.Second); ; x++ {
		if x%1000000 == 0 {
			now, err := r.WriterState(tid)
			if err != nil {
				t.Fatal(err)
			}
			if now.UserTicks > before.UserTicks {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("30 s of spinning and the user time stayed %d", now.UserTicks)
			}
		}
	}
}

func TestSyscallStateFromProc(t *testing.T) {
	for _, tc := range []struct {
		line string
		want SyscallState
	}{
		{"running\n", SyscallRunning},
		{"1 0x3 0x7f0000000000 0x4000000 0x0 0x0 0x0 0x7ffc00000000 0x5a0000001000\n", SyscallInWrite},
		{"20 0x3 0x7ffc 0x2 0x0 0x0 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite},
		{"40 0x4 0x3 0x0 0x4000000 0x0 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite},  // sendfile
		{"275 0x3 0x0 0x4 0x0 0x100000 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite},  // splice
		{"326 0x3 0x0 0x4 0x0 0x100000 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite},  // copy_file_range
		{"209 0x7f00 0x1 0x7ffc 0x0 0x0 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite}, // io_submit
		{"426 0x3 0x1 0x0 0x0 0x0 0x8 0x7ffc00000000 0x7f0100000000\n", SyscallInWrite},       // io_uring_enter
		{"0 0x3 0x7ffc 0x2 0x0 0x0 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallOutside},
		{"202 0x7f 0x80 0x0 0x0 0x0 0x0 0x7ffc00000000 0x400000\n", SyscallOutside},
		{"-1 0x7ffc0 0x7f01\n", SyscallOutside},
		{"", SyscallUnknown},
		{"garbage\n", SyscallUnknown},
		{"4 0x3 0x804a000 0x10 0x0 0x0 0x0 0xffd0a000 0x8049000\n", SyscallUnknown},               // a 32-bit program's
		{"1073741825 0x3 0x7ffc 0x2 0x0 0x0 0x0 0x7ffc00000000 0x7f0100000000\n", SyscallUnknown}, // an x32 program's write
		{"-1 0xffd0a000 0x8049000\n", SyscallOutside},                                             // a 32-bit program in its code
	} {
		if runtime.GOARCH != "amd64" && tc.want != SyscallRunning && tc.want != SyscallUnknown && !strings.HasPrefix(tc.line, "-1") {
			continue // the numbers are amd64's
		}
		if got := syscallState([]byte(tc.line)); got != tc.want {
			t.Errorf("syscallState(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// TestSyscallOfRealThreads: a child stopped in write(2) on a full pipe is
// inside a write; one stopped in read(2) is outside any.
func TestSyscallOfRealThreads(t *testing.T) {
	for _, tc := range []struct {
		script, wchan string
		want          SyscallState
	}{
		{"head -c 1000000 /dev/zero", "pipe_write", SyscallInWrite},
		{"cat", "pipe_read", SyscallOutside},
	} {
		cmd := exec.Command("sh", "-c", "exec "+tc.script)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe() // never read: a write fills it and waits
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := "/proc/" + strconv.Itoa(cmd.Process.Pid)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if b, _ := os.ReadFile(base + "/wchan"); strings.Contains(string(b), tc.wchan) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never slept in %s", tc.script, tc.wchan)
			}
		}
		if got, err := readSyscall(base); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.script, got, err, tc.want)
		}
		in.Close()
		out.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
}
