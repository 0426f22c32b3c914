package csidriver

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEphemeralStateBounded: an inline ephemeral volume (any pod author
// declares one, its id new for every pod) left its node state for good
// after its last unpublish: its logs (the audit log up to 2 × 64 MiB, the
// daemon's unbounded) and realmfs's made store (found by an adversarial
// review, 2026-12-04). Its made store now goes with it, and the logs of
// the newest keptGone dropped volumes stay, the older ones' go.
func TestEphemeralStateBounded(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	ids := []string{"csi-eph-a", "csi-eph-b", "csi-eph-c"}
	for _, id := range ids {
		target := filepath.Join(d.root, "pods", id, "mount")
		mustPublish(t, d.Driver, publishReq(id, target, map[string]string{ephemeralKey: "true"}))
		if err := os.WriteFile(filepath.Join(d.volumeDir(id), ".env"), []byte("K=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = os.ReadFile(filepath.Join(target, ".env"))
		waitAudit(t, d.auditPath(id), "CREDENTIAL_PATH_DENIED")
		mustUnpublish(t, d.Driver, id, target)
		if _, err := os.Stat(d.volumeDir(id)); !os.IsNotExist(err) {
			t.Fatalf("ephemeral workspace %s not removed: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(d.stateDir(id), realmStateDir)); !os.IsNotExist(err) {
			t.Errorf("%s: realmfs's state (its made store) left: %v", id, err)
		}
		if _, err := os.Stat(d.auditPath(id)); err != nil {
			t.Errorf("%s: the audit log is gone at once: %v", id, err)
		}
	}
	if made, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, "realmfs", "made-*.json")); len(made) > 0 {
		t.Errorf("made stores of ephemeral volumes in the shared state: %v", made)
	}
	// Past keptGone, the oldest dropped volumes' logs go.
	for i := range keptGone {
		st := d.stateDir("csi-eph-old" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		if err := os.MkdirAll(st, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(st, goneFile), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.pruneGone()
	left := 0
	for _, id := range ids {
		if _, err := os.Stat(d.stateDir(id)); err == nil {
			left++
		}
	}
	gone, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, "volumes", "*", goneFile))
	if len(gone) != keptGone || left != 0 {
		t.Errorf("after the prune: %d dropped volumes' state kept, %d of the first three; want %d, 0", len(gone), left, keptGone)
	}
}
