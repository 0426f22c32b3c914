package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDaemonCapabilities: a root daemon holds only the capabilities it
// uses (cmd/realmfs daemonCaps), in every thread and in its bounding set,
// so that no later thread or program of it can have another: none with
// which the kernel would let it make what the guard refuses (a device
// node, an immutable file) or pass a quota.
func TestDaemonCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a daemon that is not root holds no capability")
	}
	t.Parallel()
	m := mount(t)
	writeFile(t, m.Path("f"), "x\n") // the mount works as it is
	never := map[string]int{
		"CAP_SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "CAP_MKNOD": unix.CAP_MKNOD,
		"CAP_LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE, "CAP_SYS_MODULE": unix.CAP_SYS_MODULE,
		"CAP_SYS_RAWIO": unix.CAP_SYS_RAWIO, "CAP_SETUID": unix.CAP_SETUID, "CAP_SETGID": unix.CAP_SETGID,
		"CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_KILL": unix.CAP_KILL, "CAP_NET_ADMIN": unix.CAP_NET_ADMIN,
		"CAP_BPF": unix.CAP_BPF, "CAP_SYS_BOOT": unix.CAP_SYS_BOOT,
	}
	status, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", m.Pid))
	if err != nil || len(status) == 0 {
		t.Fatalf("the daemon's threads: %v, %v", status, err)
	}
	for _, st := range append(status, fmt.Sprintf("/proc/%d/status", m.Pid)) {
		b, err := os.ReadFile(st)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, line := range strings.Split(string(b), "\n") {
			key, v, _ := strings.Cut(line, ":")
			if key != "CapEff" && key != "CapPrm" && key != "CapBnd" && key != "CapInh" {
				continue
			}
			seen++
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", st, line, err)
			}
			for name, c := range never {
				if mask&(1<<c) != 0 {
					t.Errorf("%s: %s holds %s", st, key, name)
				}
			}
			if key == "CapEff" && mask&(1<<unix.CAP_SYS_ADMIN) == 0 {
				t.Errorf("%s: the daemon lost CAP_SYS_ADMIN, which it mounts with", st)
			}
		}
		if seen != 4 {
			t.Fatalf("%s: %d capability sets read, want 4", st, seen)
		}
	}
}
