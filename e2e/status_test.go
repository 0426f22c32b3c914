package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStatus: `realmfs status` asks the daemon through its control socket
// and lists a write lock another owner holds (its path, owner and mode),
// the refusals so far and the sweep's result; a path that is no realmfs
// mount is an error (exit 1).
func TestStatus(t *testing.T) {
	m := mount(t, Opts("lockowner=session"), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("f"), "before\n")
		writeFile(t, m.BackingPath(".env"), "K=1\n")
	}))
	if _, err := os.ReadFile(m.Path(".env")); err == nil {
		t.Fatal("reading .env through the mount succeeded")
	}
	fifo := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The writer: its own session, f open for appending until the FIFO
	// says go; it says ready on its stdout once it has written.
	writer := exec.Command("sh", "-c", "exec 3>>f; echo more >&3; echo ready; read x < "+fifo)
	writer.Dir = m.Dir
	writer.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := writer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(fifo, []byte("go\n"), 0) // opens the FIFO: the writer's read returns
		writer.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the writer: %q, %v", line, err)
	}

	out, err := exec.Command(realmfsBin, "status", m.Dir, "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("realmfs status: %v\n%s", err, out)
	}
	var st struct {
		Mountpoint, Backing string
		Pid                 int
		Locks               []struct{ Path, Owner, Mode string }
		Refusals            int
		Scanned             int64
		Sweep               *struct{ Entries int }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("realmfs status -o json: %v\n%s", err, out)
	}
	owner := "session:" + strconv.Itoa(writer.Process.Pid)
	if len(st.Locks) != 1 || st.Locks[0].Path != "f" || st.Locks[0].Owner != owner || st.Locks[0].Mode != "append" {
		t.Errorf("status locks %+v, want f held by %s, append\n%s", st.Locks, owner, out)
	}
	if st.Sweep != nil && st.Scanned != int64(st.Sweep.Entries) {
		t.Errorf("status: the sweep walked %d entries, but %d are counted as scanned\n%s", st.Sweep.Entries, st.Scanned, out)
	}
	if st.Backing != m.Backing || st.Refusals < 1 {
		t.Errorf("status: backing %q, refusals %d; want %s and the .env refusal\n%s", st.Backing, st.Refusals, m.Backing, out)
	}
	text, err := exec.Command(realmfsBin, "status").CombinedOutput()
	if err != nil || !strings.Contains(string(text), m.Dir+": pid ") || !strings.Contains(string(text), "f     "+owner+"  append") {
		t.Errorf("realmfs status (all mounts): %v\n%s", err, text)
	}
	out, err = exec.Command(realmfsBin, "status", m.Backing).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "not a realmfs mount") {
		t.Errorf("realmfs status BACKING: %v\n%s\nwant exit 1, not a realmfs mount", err, out)
	}
}
