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
	limitMemory(os.Getenv, debug.SetMemoryLimit)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runIO(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// memoryLimit is realmctl's soft memory limit where GOMEMLIMIT sets
// none. Its live heap is a few MiB and what it keeps of a command's output
// is bounded (sandbox.CaptureLimit a stream), but the podman bindings'
// attach allocates a buffer for every frame of output
// (containers.DemuxFrame), and with Go's pacing alone 1 GiB of output
// once grew its RSS by 54 MiB (7-16 MiB in other runs of the soak's
// TestRealmctlSession). At the limit the collector runs before that
// garbage piles up; past it (a live heap that large) Go caps the
// collector's share of the CPU, so the limit slows realmctl rather than
// failing it.
const memoryLimit = 40 << 20

// limitMemory sets memoryLimit through set, unless getenv has GOMEMLIMIT:
// the operator's limit stands.
func limitMemory(getenv func(string) string, set func(int64) int64) {
	if getenv("GOMEMLIMIT") == "" {
		set(memoryLimit)
	}
}

// run is realmctl without the process around it and with no stdin, for
// tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, args, nil, stdout, stderr)
}
