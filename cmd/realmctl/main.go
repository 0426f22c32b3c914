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
  realmctl [global flags] session create --workspace DIR [--policy FILE] [--image IMG]
                                          [--name NAME] [--egress HOST[:PORT]]... [--user UID[:GID]]
                                          [--runtime podman] [-- WORKLOAD ARGV...]
  realmctl [global flags] session exec ID|NAME [--timeout 30s] [--workdir DIR] -- ARGV...
  realmctl [global flags] session destroy ID|NAME
  realmctl [global flags] session list
  realmctl [global flags] image init [--busybox /bin/busybox]
  realmctl [global flags] reap [--all]

A session is a sandbox whose /workspace is the workspace's realmfs mount:
every file access from inside passes realm's guard (no escapes, no
credential files, one writer per file across sessions, atomic writes).
Sessions on one workspace share one mount, so they see each other's locks.

session create   validates everything first (nothing happens if anything is
                 invalid), reaps what crashed sessions left (unless --no-reap),
                 mounts the workspace if it is not mounted yet, starts the
                 sandbox and prints the session id. The sandbox runs as the
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
reap             removes what dead sessions left: containers first (proven
                 gone by listing again), then dead realmfs mounts, then
                 records. Live sessions (active, mount answering, sandbox
                 running) are kept; --all removes every session.

Egress: the Podman runtime cannot filter destinations. Without --egress a
sandbox has no network at all; with it, the sandbox joins Podman's default
network and can reach any host. The allowlist is validated and recorded,
and enforced only by the OpenShell runtime.

Exit status: 0 ok; 2 SCHEMA_INVALID (bad flags, policy, egress or request;
nothing was started); 124 TOOL_TIMEOUT; 69 REALM_NOT_ACTIVE (no such
session, sandbox gone or not running, Podman not answering); 75
REALM_STOPPING (a container survived removal; no record was deleted); 1 any
other failure. session exec in text mode exits with the command's status.
With -o json an error is printed as {"error":{"code":"…","message":"…"}}.

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
	g := newGlobals()
	top := pflag.NewFlagSet("realmctl", pflag.ContinueOnError)
	top.SetInterspersed(false)
	top.SetOutput(io.Discard)
	g.register(top)
	help := top.BoolP("help", "h", false, "show this help")
	top.Usage = func() {}
	if err := top.Parse(args); err != nil {
		return fail(&output{format: "text", w: stdout, ew: stderr}, usageErr("%v", err))
	}
	out := &output{format: g.format, w: stdout, ew: stderr}
	if *help || top.NArg() == 0 {
		fmt.Fprint(stdout, usage)
		top.SetOutput(stdout)
		top.PrintDefaults()
		if *help {
			return 0
		}
		return errcode.ExitUsage
	}
	cmd, rest := top.Arg(0), top.Args()[1:]
	var err error
	switch cmd {
	case "session":
		if len(rest) == 0 {
			err = usageErr("session needs a subcommand: create, exec, destroy or list")
			break
		}
		switch rest[0] {
		case "create":
			err = sessionCreate(ctx, g, out, rest[1:])
		case "exec":
			var code int
			code, err = sessionExec(ctx, g, out, rest[1:])
			if err == nil {
				return code
			}
		case "destroy":
			err = sessionDestroy(ctx, g, out, rest[1:])
		case "list":
			err = sessionList(ctx, g, out, rest[1:])
		default:
			err = usageErr("unknown session subcommand %q (want create, exec, destroy or list)", rest[0])
		}
	case "image":
		if len(rest) == 0 || rest[0] != "init" {
			err = usageErr("image needs the subcommand init")
			break
		}
		err = imageInit(ctx, g, out, rest[1:])
	case "reap":
		err = reapCmd(ctx, g, out, rest)
	case "help":
		fmt.Fprint(stdout, usage)
		top.SetOutput(stdout)
		top.PrintDefaults()
		return 0
	default:
		err = usageErr("unknown command %q (want session, image or reap; see realmctl --help)", cmd)
	}
	if errors.Is(err, errHelp) {
		return 0
	}
	return fail(out, err)
}
