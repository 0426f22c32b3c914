package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox"
)

// execFlags are session exec's own flags.
type execFlags struct {
	timeout     time.Duration
	workdir     string
	interactive bool
	tty         bool
	env         []string
}

func sessionExecCmd(c *cli) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:     "exec ID|NAME [flags] -- ARGV...",
		Aliases: []string{"run"},
		Short:   "run a command in a session",
		Long: `session exec runs ARGV in the session (in /workspace unless --workdir).

Without -t, stdout and stderr are each kept up to 262144 bytes; the rest is
dropped and marked truncated. At --timeout the command's whole process tree
is killed. In text mode realmctl prints the output and exits with the
command's exit status; with -o json it prints {"exitCode":N,"stdout":"…",
"stderr":"…","stdoutTruncated":B,"stderrTruncated":B} and exits 0.

A session whose realmfs mount does not answer, or whose sandbox its
runtime says is not running, is dead: exec fails with REALM_NOT_ACTIVE
(exit 69) saying so and what to do (realmctl reap, or realmctl session
destroy ID), and never runs the command.

-i forwards realmctl's stdin to the command until EOF. -t runs the command
on a terminal (realmctl's stdin must be one): stdin is forwarded, the
terminal is put in raw mode, the command's TTY follows the terminal's size,
and its output goes straight to the terminal: the bounded capture does not
apply, -o json is refused, and --timeout defaults to none. So a person gets
a shell with: realmctl session exec -it ID -- /bin/sh

--env K=V (repeatable) adds to the command's environment; --env K passes
K's value in realmctl's environment (none if K is unset there), as podman
and docker do. -i, -t and --env
are Podman's: the OpenShell runtime refuses them (realm never passes --env
to the OpenShell CLI, so no value from here reaches a sandbox's
environment).`,
		Example: `  realmctl session exec agent-1 -- make test
  realmctl session exec -it agent-1 -- /bin/sh
  realmctl -o json session exec --timeout 5m agent-1 -- go test ./...
  realmctl session exec -e GOFLAGS -e CI=true agent-1 -- go build ./...`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
	}
	fs := cmd.Flags()
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "kill the command's whole process tree after this long (0: no limit; with -t the default is no limit)")
	fs.StringVar(&f.workdir, "workdir", "", "working directory inside the sandbox (default /workspace)")
	fs.BoolVarP(&f.interactive, "interactive", "i", false, "forward stdin to the command")
	fs.BoolVarP(&f.tty, "tty", "t", false, "run the command on a terminal that follows this one's size (no capture, no JSON)")
	fs.StringArrayVarP(&f.env, "env", "e", nil, "set `K=V` in the command's environment, or pass K's value here with a bare K (repeatable; podman only)")
	cmd.RunE = c.action(func(ctx context.Context, args []string, dash int) (int, error) {
		if f.tty && !cmd.Flags().Changed("timeout") {
			f.timeout = 0
		}
		return c.sessionExec(ctx, args, dash, f)
	})
	return cmd
}

// envName is what --env accepts as a variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnv checks --env's K=V pairs. A bare K passes the value K has in
// realmctl's environment, as podman and docker do; a K that is not set
// there is not passed (podman's rule too). The exec's own marker variable is
// realm's: an --env that named it could hide a process tree from the kill.
func parseEnv(env []string, lookup func(string) (string, bool)) ([]string, error) {
	var out []string
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			v, set := lookup(k)
			if !set {
				if !envName.MatchString(k) {
					return nil, usageErr("--env %q: %q is not a variable name", kv, k)
				}
				continue
			}
			kv = k + "=" + v
		}
		if !envName.MatchString(k) {
			return nil, usageErr("--env %q: %q is not a variable name", kv, k)
		}
		if k == sandbox.ExecTokenVar {
			return nil, usageErr("--env %q: %s is realm's own", kv, k)
		}
		out = append(out, kv)
	}
	return out, nil
}

// sessionExec returns the exit status realmctl should end with.
func (c *cli) sessionExec(ctx context.Context, args []string, dash int, f execFlags) (int, error) {
	out := c.out
	if dash != 1 || len(args) < 2 {
		return 0, usageErr("session exec wants ID -- ARGV...")
	}
	if f.timeout < 0 {
		return 0, usageErr("--timeout %s: must not be negative", f.timeout)
	}
	env, err := parseEnv(f.env, os.LookupEnv)
	if err != nil {
		return 0, err
	}
	if f.tty && out.machine() {
		return 0, usageErr("session exec -t: a terminal has no JSON or YAML result; drop -o %s or -t", out.format)
	}
	if f.tty && !isTerminal(os.Stdin) {
		return 0, usageErr("session exec -t: stdin is not a terminal; run it from one, or use -i without -t")
	}
	a, err := newApp(c.g)
	if err != nil {
		return 0, err
	}
	req := sandbox.ExecRequest{Argv: args[1:], Workdir: f.workdir, Timeout: f.timeout, Env: env}
	if f.interactive || f.tty || len(env) > 0 {
		rec, err := a.mgr.Resolve(args[0])
		if err != nil {
			return 0, err
		}
		if rec.Runtime != "podman" {
			switch {
			case len(env) > 0:
				return 0, usageErr("session exec --env: the %s runtime takes no --env (realm never passes --env to the OpenShell CLI, so no value from here reaches a sandbox's environment)", rec.Runtime)
			default:
				return 0, usageErr("session exec -i/-t: the %s runtime runs commands without stdin or a terminal; only podman sessions take -i and -t", rec.Runtime)
			}
		}
		if f.tty {
			return c.execTerminal(ctx, a, rec, req)
		}
	}
	if f.interactive {
		req.Stdin = c.in
		if req.Stdin == nil {
			req.Stdin = eofReader{}
		}
	}
	res, err := a.mgr.Exec(ctx, args[0], req)
	if err != nil {
		return 0, err
	}
	if out.machine() {
		out.print(res, nil)
		return 0, nil
	}
	io.WriteString(out.w, res.Stdout)
	io.WriteString(out.ew, res.Stderr)
	if res.StdoutTruncated {
		out.note("stdout was truncated at %d bytes", sandbox.CaptureLimit)
	}
	if res.StderrTruncated {
		out.note("stderr was truncated at %d bytes", sandbox.CaptureLimit)
	}
	return exitStatus(res.ExitCode), nil
}

// execTerminal runs req on realmctl's terminal in the podman session rec.
func (c *cli) execTerminal(ctx context.Context, a *app, rec *sandbox.Record, req sandbox.ExecRequest) (int, error) {
	if err := a.mgr.ExecReady(rec); err != nil {
		return 0, err
	}
	rt, err := a.runtime(ctx, rec.Runtime)
	if err != nil {
		return 0, err
	}
	p, ok := rt.(*sandbox.Podman)
	if !ok {
		return 0, usageErr("session exec -t: the %s runtime has no terminal", rec.Runtime)
	}
	code, err := p.ExecTerminal(ctx, *rec.ContainerID, req)
	if err != nil {
		return 0, a.mgr.Dead(ctx, rec, err)
	}
	return exitStatus(code), nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// exitStatus maps a command's exit code to one a process can exit with.
func exitStatus(code int) int {
	if code < 0 || code > 255 {
		return 255
	}
	return code
}

func sessionLogsCmd(c *cli) *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs ID|NAME",
		Short: "print the sandbox's output (the workload's stdout and stderr)",
		Long: `session logs prints what the session's workload wrote to stdout and stderr:
the container's logs for a podman session. --follow goes on until the
sandbox stops or realmctl is interrupted. The OpenShell runtime keeps no
such log realm can read.`,
		Example: `  realmctl session logs agent-1
  realmctl session logs -f -n 0 agent-1`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			a, rec, err := resolveOne(c.g, args, "logs")
			if err != nil {
				return 0, err
			}
			if rec.ContainerID == nil {
				return 0, errcode.New(errcode.RealmNotActive, "session %s has no sandbox yet", rec.ID)
			}
			rt, err := a.runtime(ctx, rec.Runtime)
			if err != nil {
				return 0, err
			}
			p, ok := rt.(*sandbox.Podman)
			if !ok {
				return 0, usageErr("session logs: the %s runtime keeps no sandbox log realm can read", rec.Runtime)
			}
			return 0, p.Logs(ctx, *rec.ContainerID, follow, tail, c.out.w, c.out.ew)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing until the sandbox stops")
	cmd.Flags().IntVarP(&tail, "tail", "n", -1, "print only the last `N` lines (0: none, then only new ones with --follow; -1: all)")
	return cmd
}
