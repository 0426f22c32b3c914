// Command realm-csi is realm's CSI plugin: it serves the CSI Identity,
// Controller and Node services on a unix socket and gives every pod that
// asks for a realm volume a realmfs mount of its workspace. The logic is
// in package csidriver; this is its wiring.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/realm-dev/realm/csidriver"
)

// version is stamped by the Makefile (-X main.version=...).
var version = "devel"

func main() {
	if err := run(os.Args[1:], os.Stderr); errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "realm-csi:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fl := flag.NewFlagSet("realm-csi", flag.ContinueOnError)
	fl.SetOutput(stderr)
	endpoint := fl.String("endpoint", "unix:///csi/csi.sock", "the CSI endpoint, unix:///PATH")
	nodeID := fl.String("nodeid", "", "this node's name (required)")
	baseDir := fl.String("base-dir", "/var/lib/realm-csi/workspaces", "workspaces live in DIR/volumes/<id>")
	stateDir := fl.String("state-dir", "/var/lib/realm-csi/state", "the policies, audit logs and daemon logs of published volumes")
	realmfs := fl.String("realmfs", "", "the realmfs binary (default: beside realm-csi, else on PATH)")
	policyDir := fl.String("policy-dir", "", "the policies a volume may name with policyName=NAME (DIR/NAME.yaml)")
	daemonCgroup := fl.String("daemon-cgroup", "", "a cgroup2 `DIR` (e.g. /sys/fs/cgroup/realm-csi) to start each volume's realmfs daemon\n"+
		"into (DIR/<volume id>), so that restarting or upgrading the plugin's container, which\n"+
		"kills every process in the container's cgroup, leaves the mounts serving. It must not be\n"+
		"inside the plugin's own cgroup (a daemon there dies with the container): the container\n"+
		"needs the host's /sys/fs/cgroup mounted. Limit the daemons with DIR's files\n"+
		"(memory.max, pids.max); they are outside the pod's limits. Default: the plugin's cgroup")
	ephemeralSize := fl.String("ephemeral-size", "10Gi", "the most bytes an inline ephemeral volume may hold (`SIZE`: bytes, or with k, M, G, T, Ki, Mi, Gi, Ti),\n"+
		"its size where its volumeAttributes give none (size: 2Gi asks less); enforced where the\n"+
		"base dir's file system has project quotas, else reported only. 0: unbounded")
	showVersion := fl.Bool("version", false, "print the version and exit")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("realm-csi", version)
		return nil
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	ephemeral, err := csidriver.ParseSize(*ephemeralSize)
	if err != nil {
		return fmt.Errorf("--ephemeral-size: %w", err)
	}
	bin, err := findRealmfs(*realmfs)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	d, err := csidriver.New(csidriver.Config{
		NodeID: *nodeID, BaseDir: *baseDir, StateDir: *stateDir, PolicyDir: *policyDir,
		Realmfs: bin, DaemonCgroup: *daemonCgroup, EphemeralSize: ephemeral, Version: version, Log: log,
	})
	if err != nil {
		return err
	}
	lis, err := csidriver.Listen(*endpoint)
	if err != nil {
		return err
	}
	d.Recover()
	srv := d.Server()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// The mounts stay: they belong to their pods, not to the plugin.
		srv.GracefulStop()
	}()
	log.Info("serving", "endpoint", *endpoint, "node", *nodeID, "realmfs", bin, "daemon-cgroup", *daemonCgroup, "version", version)
	err = srv.Serve(lis)
	d.Close() // the audit lines the volumes' logs hold by now are forwarded
	return err
}

// findRealmfs is the realmfs binary: the flag's, else the one beside this
// binary (the image ships both), else realmfs on PATH.
func findRealmfs(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "realmfs")
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			return beside, nil
		}
	}
	p, err := exec.LookPath("realmfs")
	if err != nil {
		return "", errors.New("no realmfs beside realm-csi nor on PATH (--realmfs)")
	}
	return p, nil
}
