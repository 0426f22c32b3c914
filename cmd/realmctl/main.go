// Command realmctl runs agent sessions: sandboxes (Podman containers, or
// NVIDIA OpenShell) with the workspace's guarded realmfs mount at
// /workspace, commands in them with bounded output and real timeouts, and
// the reaper that cleans up after crashes.
//
// This package parses the command line (spf13/cobra on pflag) and wires the
// sandbox and reaper packages together; the logic lives there.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is realmctl's version, stamped by the Makefile
// (-ldflags "-X main.version=..."); empty: the module's build info.
var version = ""

// versionString is the version realmctl reports, as realmfs does.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runIO(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is realmctl without the process around it and with no stdin, for
// tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, args, nil, stdout, stderr)
}
