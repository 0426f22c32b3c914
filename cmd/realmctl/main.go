// Command realmctl runs agent sessions: sandboxes (Podman containers, or
// NVIDIA OpenShell) with the workspace's guarded realmfs mount at
// /workspace, commands in them with bounded output and real timeouts, and
// the reaper that cleans up after crashes.
//
// This package parses flags and wires the sandbox and reaper packages
// together; the logic lives there.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"realm/errcode"
)

const usage = `realmctl runs agent sessions on a guarded workspace.

Usage:
  realmctl session create --workspace DIR [--policy FILE] [--image IMG]
                          [--name NAME] [--egress HOST[:PORT]]... [--user UID[:GID]]
                          [--runtime podman|openshell] [-- WORKLOAD ARGV...]
  realmctl session exec ID|NAME [--timeout 30s] [--workdir DIR] -- ARGV...
  realmctl session destroy ID|NAME
  realmctl session list
  realmctl image init [--busybox /bin/busybox]
  realmctl reap [--all]
  realmctl openshell-interceptor --listen unix:///PATH

Global flags go anywhere before "--": before the command, between its words,
or after it (realmctl -o json session list, realmctl session -o json list and
realmctl session list -o json are the same). Everything after "--" is the
workload's or the command's argv and is never read as a flag.

A session is a sandbox whose /workspace is the workspace's realmfs mount:
every file access from inside passes realm's guard (no escapes, no
credential files, one writer per file across sessions, atomic writes).
Sessions on one workspace share one mount, so they see each other's locks.

session create   validates everything first (nothing happens if anything is
                 invalid), reaps what crashed sessions left (unless --no-reap),
                 mounts the workspace if it is not mounted yet, starts the
                 sandbox, proves that its /workspace is the guarded mount (a
                 canary written through the mount must be read back inside)
                 and prints the session id. The sandbox runs as the
                 owner of the workspace directory unless --user is given; it
                 has no network unless --egress is given. The workload
                 defaults to a long sleep; argv[0] must be absolute.
session exec     runs ARGV in the session (in /workspace unless --workdir).
                 stdout and stderr are each kept up to 262144 bytes; the rest
                 is dropped and marked truncated. At --timeout the command's
                 whole process tree is killed. In text mode realmctl prints
                 the output and exits with the command's exit status; with
                 -o json it prints {"exitCode":N,"stdout":"…","stderr":"…",
                 "stdoutTruncated":B,"stderrTruncated":B} and exits 0.
session destroy  removes the sandbox, unmounts the workspace after its last
                 session, and only then deletes the session's record.
session list     lists the sessions of the state dir.
image init       builds localhost/realm-base:latest, the default image, from
                 the host's busybox-static (no registry needed).
reap             removes what dead sessions left: sandboxes and containers
                 first (proven gone by listing again), then dead realmfs
                 mounts, then records. Live sessions (active, mount
                 answering, sandbox running) are kept; --all removes every
                 session. Only the runtimes that are installed or that a
                 record names are asked.
openshell-interceptor
                 serves the OpenShell gateway interceptor that binds each
                 realm session's guarded mount at /workspace (see README).

Egress: the Podman runtime cannot filter destinations. Without --egress a
sandbox has no network at all; with it, the sandbox joins Podman's default
network and can reach any host. The allowlist is validated and recorded,
and enforced only by the OpenShell runtime.

Exit status: 0 ok; 2 SCHEMA_INVALID (bad flags, policy, egress or request;
nothing was started); 124 TOOL_TIMEOUT; 69 REALM_NOT_ACTIVE (no such
session, sandbox gone or not running, a runtime a session needs not
answering, /workspace not the guarded mount); 75 REALM_STOPPING (a container
survived removal; no record was deleted); 1 any other failure. session exec
in text mode exits with the command's status. With -o json an error is
printed as {"error":{"code":"…","message":"…"}}.

Global flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is realmctl without the process around it, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	inv, err := parseCommandLine(args, stdout)
	if inv == nil {
		return fail(&output{format: "text", w: stdout, ew: stderr}, err)
	}
	out := &output{format: inv.g.format, w: stdout, ew: stderr}
	if err != nil {
		if inv.g.format != "json" {
			out.format = "text"
		}
		if errors.Is(err, errHelp) {
			return 0
		}
		return fail(out, err)
	}
	if inv.cmd == nil { // no command: the top-level usage
		printUsage(stdout)
		return errcode.ExitUsage
	}
	code, err := inv.run(ctx, inv.g, out, inv.flags)
	if err != nil {
		return fail(out, err)
	}
	return code
}

// printUsage prints the top-level help with the global flags.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	fs := pflag.NewFlagSet("realmctl", pflag.ContinueOnError)
	newGlobals().register(fs)
	fs.BoolP("help", "h", false, "show this help")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
