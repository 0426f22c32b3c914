package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSecondMountLeavesFirstsTemps: a second realmfs over the same BACKING
// (here on the same host; a node sharing BACKING is the same) sweeps the
// temps a crash left at its start. The first daemon's temp of a write in
// progress is not one: it holds that write's uncommitted bytes, and its
// daemon lives (its mark is flocked: fusefs/templive). The write commits
// as it would have, and the second mount's sweep leaves it alone.
func TestSecondMountLeavesFirstsTemps(t *testing.T) {
	m := mount(t, Prepare(func(m *Mount) { writeFile(t, m.BackingPath("data"), "old\n") }))
	f, err := os.OpenFile(m.Path("data"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new\n"); err != nil {
		t.Fatal(err)
	}
	if len(tempResidue(t, m.Backing)) == 0 {
		t.Fatal("the write in progress keeps no temp in BACKING")
	}
	second, log := filepath.Join(m.Root, "mnt2"), filepath.Join(m.Root, "second.log")
	if err := os.Mkdir(second, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(realmfsBin, "-f", "-o", "journal=off", "--log", log, "--state-dir", filepath.Join(m.Root, "state2"), m.Backing, second)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("fusermount3", "-u", second).Run()
		cmd.Wait()
	})
	waitForLine(t, log, "sweep done")
	if err := f.Close(); err != nil {
		t.Errorf("the first mount's writer: close: %v (its temp swept by the second mount)", err)
	}
	if got := readFile(t, m.BackingPath("data")); got != "new\n" {
		t.Errorf("data is %q, want the writer's new content", got)
	}
}
