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

// childEnv runs TestLimit's child: the test binary itself, which limits
// its capabilities, executes itself again and reports.
const childEnv = "REALM_TEST_CAPDROP_CHILD"

// dropped are the capabilities the test takes away: two the test can
// spare (the daemon drops these among others; CAP_SYS_RESOURCE, which
// matters most to it, this machine may not grant at all).
var dropped = []int{unix.CAP_SYS_BOOT, unix.CAP_MKNOD}

// TestLimit limits a child to what the test holds less dropped, and
// checks that afterwards no thread of it holds either, its bounding set
// lacks them, so that no thread it starts later and no program it runs
// can have them either, and it still holds what it kept.
func TestLimit(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		child()
		return
	}
	needCaps(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLimit$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	if !strings.Contains(string(out), "limited: threads holding 0; in bounding 0; kept true; marked true") || strings.Contains(string(out), "threads read: 0") {
		t.Fatalf("child did not limit its capabilities:\n%s", out)
	}
}

// unlinkEnv makes the child remove its own binary before it limits
// itself, as an upgrade does under a running daemon.
const unlinkEnv = "REALM_TEST_CAPDROP_UNLINK"

// TestLimitKeepsName: a process whose binary was removed since it started
// is executed again by /proc/self/exe, and still bears its own name
// afterwards, not "exe" (realmfs audit MOUNTPOINT knows its daemon by it).
func TestLimitKeepsName(t *testing.T) {
	needCaps(t)
	bin := filepath.Join(t.TempDir(), "capdrop-named")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestLimit$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", unlinkEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	for _, want := range []string{"executable: /proc/self/exe gone", "limited: threads holding 0;", "name: capdrop-named\n", "name carried: false"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child's output lacks %q", want)
		}
	}
}

// child limits itself (the first run executes the binary again and never
// returns here) and prints what its threads hold.
func child() {
	_, data, err := capget()
	if err != nil {
		fmt.Println("capget:", err)
		os.Exit(2)
	}
	var keep []int
	for c := range lastCap() + 1 {
		if data[c/32].Permitted&(1<<(c%32)) != 0 && c != dropped[0] && c != dropped[1] {
			keep = append(keep, c)
		}
	}
	if os.Getenv(unlinkEnv) == "1" && os.Getenv(limitedEnv) != "1" {
		self, err := os.Executable()
		if err == nil {
			err = os.Remove(self)
		}
		if err != nil {
			fmt.Println("unlink:", err)
			os.Exit(2)
		}
	}
	if err := Limit(keep); err != nil {
		fmt.Println("limit failed:", err)
		os.Exit(2)
	}
	holding, read, inBounding := 0, 0, 0
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, status := range tasks {
		eff, ok := capEff(status)
		if ok {
			read++
		}
		for _, c := range dropped {
			if !ok || eff&(1<<c) != 0 {
				holding++
			}
		}
	}
	for _, c := range dropped {
		if in, _ := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); in != 0 {
			inBounding++
		}
	}
	kept, _ := holds(unix.CAP_SYS_ADMIN)
	fmt.Printf("threads read: %d\n", read)
	if self, err := os.Readlink("/proc/self/exe"); err == nil && strings.HasSuffix(self, " (deleted)") {
		fmt.Println("executable: /proc/self/exe gone")
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	fmt.Printf("name: %s", comm)
	fmt.Printf("name carried: %v\n", os.Getenv(nameEnv) != "")
	fmt.Printf("limited: threads holding %d; in bounding %d; kept %v; marked %v\n", holding, inBounding, kept, os.Getenv(limitedEnv) == "1")
}

// needCaps skips a test that cannot drop what it drops (not root).
func needCaps(t *testing.T) {
	t.Helper()
	for _, c := range append(dropped, unix.CAP_SETPCAP) {
		if has, err := holds(c); err != nil || !has {
			t.Skipf("the test needs capability %d to drop (root): held %v, %v", c, has, err)
		}
	}
}

// holds reports whether the calling thread has capability c in its
// effective set.
func holds(c int) (bool, error) {
	_, data, err := capget()
	if err != nil {
		return false, err
	}
	return data[c/32].Effective&(1<<(c%32)) != 0, nil
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

// TestMaskWord: the allowlist's mask, word by word.
func TestMaskWord(t *testing.T) {
	keep := []int{0, 5, 31, 32, 40}
	if got, want := maskWord(keep, 0), uint32(1|1<<5|1<<31); got != want {
		t.Errorf("word 0: %#x, want %#x", got, want)
	}
	if got, want := maskWord(keep, 1), uint32(1|1<<8); got != want {
		t.Errorf("word 1: %#x, want %#x", got, want)
	}
}
