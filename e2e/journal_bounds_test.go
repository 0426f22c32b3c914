package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestJournalBounds: a journal over -o journal_max drops its oldest
// records when the daemon mounts (whole segments, with the versions their
// changes kept), and `realmfs journal list` then says which changes the
// bounds dropped; the changes made since are listed.
func TestJournalBounds(t *testing.T) {
	m := mount(t, Opts("journal=on"))
	writeFile(t, m.Path("old"), "old\n")
	writeFile(t, m.Path("old"), "older\n") // a rewrite: the version before is kept
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, j := journalRecords(t, m.Backing)
	if len(recs) == 0 {
		t.Fatal("the first mount recorded nothing")
	}
	last := recs[len(recs)-1].Seq
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A segment alone is over 1 KiB: the mount drops every record so far.
	m.cfg.opts = []string{"journal=on", "journal_max=1K"}
	m.Restart()
	writeFile(t, m.Path("new"), "new\n")
	var out, errb bytes.Buffer
	cmd := exec.Command(realmfsBin, "journal", "list", m.Dir)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("realmfs journal list: %v\n%s", err, errb.String())
	}
	if strings.Contains(out.String(), "old") || !strings.Contains(out.String(), "new") {
		t.Errorf("journal list after the bound, want new's records and none of old's:\n%s", out.String())
	}
	if want := "dropped changes 1 to " + strconv.FormatUint(last, 10) + " "; !strings.Contains(errb.String(), want) {
		t.Errorf("journal list's stderr %q lacks %q", errb.String(), want)
	}
	kept, err := os.ReadDir(m.BackingPath(".realm-journal", "kept"))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 0 {
		t.Errorf("kept/ holds %d entries after the bound dropped every change that kept one", len(kept))
	}
	if b, _ := os.ReadFile(m.LogFile); !strings.Contains(string(b), "journal pruned") {
		t.Errorf("the daemon's log does not say what the bound dropped:\n%s", b)
	}
}
