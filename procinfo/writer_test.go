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
