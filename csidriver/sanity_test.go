package csidriver

import (
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestSanity runs csi-sanity against the plugin with real realmfs mounts:
// every test passes, or is skipped for a capability the plugin does not
// claim (staging, snapshots, expansion, controller publish, cloning,
// modification, group snapshots).
//
// The suite is handed a connection of ours: csi-test v5.4.0's own
// (utils.Connect) waits for a state change after Dial, and when the
// channel is already ready by its first look, none comes and it times out
// after a minute. With Address empty, Setup keeps the connection it finds
// (its recorded address, "", is the configured one).
func TestSanity(t *testing.T) {
	needMounts(t)
	d := startDriver(t, buildRealmfs(t))
	conn, err := grpc.NewClient("unix://"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sanity.NewTestConfig()
	cfg.TargetPath = filepath.Join(d.root, "target")
	cfg.StagingPath = filepath.Join(d.root, "staging")
	cfg.IdempotentCount = 3
	sc := sanity.GinkgoTest(&cfg)
	sc.Conn, sc.ControllerConn = conn, conn
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "realm-csi sanity")
	sc.Finalize() // closes conn
}
