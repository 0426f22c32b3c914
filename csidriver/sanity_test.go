package csidriver

import (
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// TestSanity runs csi-sanity against the plugin with real realmfs mounts:
// every test passes, or is skipped for a capability the plugin does not
// claim (staging, snapshots, expansion, controller publish, cloning).
func TestSanity(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + d.sock
	cfg.TargetPath = filepath.Join(d.root, "target")
	cfg.StagingPath = filepath.Join(d.root, "staging")
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)
}
