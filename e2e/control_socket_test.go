package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// The control socket's bounds (an adversarial review, 2026-12-04): clients
// that connected and sent nothing each held a daemon descriptor and a
// goroutine for ever, an accept that failed for want of descriptors ended
// the accept loop for the daemon's life, and one idle client kept the
// daemon from exiting after its unmount (holding the journal's LOCK).

// controlSocketOf is the control socket of root's realmfs mount at mnt.
func controlSocketOf(t *testing.T, mnt string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/run/realmfs/%d:%d.sock", unix.Major(st.Dev), unix.Minor(st.Dev))
}

// realmfsStatus runs realmfs status on mnt: nil once the daemon answered.
func realmfsStatus(t *testing.T, mnt string) error {
	t.Helper()
	out, err := exec.Command(realmfsBin, "status", mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestControlIdleClientsBounded: more clients than the daemon serves at
// once connect and send nothing; the rest wait in the listen backlog,
// holding none of its descriptors, each idle one is dropped after a
// moment (requestPatience), and realmfs status is answered. (Only root
// and the daemon's user are answered at all, and they can stop the daemon
// anyway: what is bounded is what an idle or stuck client costs.)
func TestControlIdleClientsBounded(t *testing.T) {
	t.Parallel()
	m := mount(t)
	if err := realmfsStatus(t, m.Dir); err != nil { // the socket is there and served
		t.Fatalf("realmfs status: %v", err)
	}
	base := m.FDCount()
	path := controlSocketOf(t, m.Dir)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Logf("connection %d: %v (the backlog is full)", i, err)
			break
		}
		conns = append(conns, c)
	}
	if err := realmfsStatus(t, m.Dir); err != nil {
		t.Errorf("realmfs status beside %d idle clients: %v", len(conns), err)
	}
	// 32 served at once (maxControlConns), and a few the daemon may open
	// meanwhile.
	if n := m.FDCount(); n > base+32+8 {
		t.Errorf("the daemon holds %d descriptors beside %d idle clients, %d before: unbounded", n, len(conns), base)
	}
}

// TestControlIdleClientLeavesUnmount: a client connected to the control
// socket that sends nothing does not keep the daemon alive after its
// mount is unmounted.
func TestControlIdleClientLeavesUnmount(t *testing.T) {
	t.Parallel()
	m := mount(t, Opts("journal=on"))
	if err := realmfsStatus(t, m.Dir); err != nil {
		t.Fatalf("realmfs status: %v", err)
	}
	c, err := net.Dial("unix", controlSocketOf(t, m.Dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := m.Unmount(); err != nil {
		t.Errorf("unmount with an idle control client: %v", err)
	}
}
