package capdrop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// shedChildEnv runs TestShedCap's child: the test binary itself, which
// sheds the capability, executes itself again and reports.
const shedChildEnv = "REALMFS_TEST_SHED_CHILD"

// TestShedCap sheds a capability the test can spare (CAP_SYS_BOOT: the
// daemon sheds CAP_SYS_RESOURCE, which this machine may not grant at all) in a child, and checks that afterwards
// no thread of it holds the capability and its bounding set lacks it, so
// that no thread it starts later can have it either.
func TestShedCap(t *testing.T) {
	if os.Getenv(shedChildEnv) == "1" {
		shedChild()
		return
	}
	if has, err := Holds(unix.CAP_SYS_BOOT); err != nil || !has {
		t.Skipf("the test needs CAP_SYS_BOOT to shed (root): held %v, %v", has, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShedCap$", "-test.v")
	cmd.Env = append(os.Environ(), shedChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "shed: threads holding 0; bounding false; marked true") || strings.Contains(string(out), "threads read: 0") {
		t.Fatalf("child did not shed the capability:\n%s", out)
	}
}

// shedChild sheds CAP_SYS_BOOT (the first run executes the binary again
// and never returns here) and prints what its threads hold.
func shedChild() {
	if err := Shed(unix.CAP_SYS_BOOT, "CAP_SYS_BOOT"); err != nil {
		fmt.Println("shed failed:", err)
		os.Exit(2)
	}
	holding, read := 0, 0
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, status := range tasks {
		eff, ok := capEff(status)
		if ok {
			read++
		}
		if !ok || eff&(1<<unix.CAP_SYS_BOOT) != 0 {
			holding++
		}
	}
	fmt.Printf("threads read: %d\n", read)
	inBounding, _ := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_BOOT, 0, 0, 0)
	fmt.Printf("shed: threads holding %d; bounding %v; marked %v\n", holding, inBounding == 1, os.Getenv(shedEnv) == "1")
}

// capEff is the CapEff mask of a /proc status file; false if it cannot
// be read.
func capEff(status string) (uint64, bool) {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}
