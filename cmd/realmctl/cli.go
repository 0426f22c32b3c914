package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/errcode"
)

const longHelp = `realmctl runs agent sessions on a guarded workspace.

A session is a sandbox whose /workspace is the workspace's realmfs mount:
every file access from inside passes realm's guard (no escapes, no
credential files, one writer per file across sessions, atomic writes).
Sessions on one workspace share one mount, so they see each other's locks.

Global flags go anywhere before "--": before the command, between its words,
or after it (realmctl -o json session list, realmctl session -o json list and
realmctl session list -o json are the same). Everything after "--" is the
workload's or the command's argv and is never read as a flag.

The Podman service is found as podman finds it: --podman-socket (wins), then
--connection, then CONTAINER_HOST, then this user's own service: root's
/run/podman/podman.sock, a normal user's rootless
$XDG_RUNTIME_DIR/podman/podman.sock (start it with: systemctl --user start
podman.socket).

State (session records, mounts, logs, the lock) lives in --state-dir, else
$REALM_STATE_DIR, else root's /var/lib/realm, or for a normal user
$XDG_STATE_HOME/realm, else ~/.local/state/realm.

Egress: without --egress a sandbox has no network at all. The OpenShell
runtime enforces an --egress allowlist; the Podman runtime cannot filter
destinations, so a Podman create with --egress is refused (SCHEMA_INVALID)
rather than given a network that reaches every host.

Exit status: 0 ok; 2 a command line that does not parse (unknown command or
flag: code USAGE) or SCHEMA_INVALID (bad policy, egress or request; nothing
was started); 124 TOOL_TIMEOUT; 69 REALM_NOT_ACTIVE (no such session;
a dead session, its sandbox gone or not running or its realmfs mount not
answering: run realmctl reap, or realmctl session destroy ID; a runtime a
session needs not answering; /workspace not the guarded mount); 75 REALM_STOPPING (a container survived
removal; no record was deleted); 1 any other failure. session exec in text
mode exits with the command's status. With -o json an error is printed as
{"error":{"code":"…","message":"…"}}.`

// cli is one realmctl invocation: the parsed global flags, where output
// goes, the stdin session exec -i forwards, and the exit status a command
// that succeeded asked for.
type cli struct {
	g    *globals
	out  *output
	in   io.Reader
	code int
}

// usageError is a command line that does not parse: an unknown command or
// flag, a bad flag value. Exit 2, JSON code USAGE; it is not SCHEMA_INVALID,
// which is a request realm understood and refused.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ranError marks an error a command returned, as opposed to one cobra
// returned while parsing (every one of which is a usageError).
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// runIO runs realmctl's command line and returns its exit status.
func runIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{g: newGlobals(), out: &output{format: "text", w: stdout, ew: stderr}, in: stdin}
	root := newRoot(c)
	root.SetArgs(args)
	root.SetIn(strings.NewReader(""))
	root.SetOut(stdout)
	root.SetErr(stderr)
	exampleCobrasCommands(root) // after SetOut: cobra's completion commands keep the writer they see
	cmd, err := root.ExecuteContextC(ctx)
	if c.g.check() == nil {
		c.out.format = c.g.format
	}
	if err == nil {
		return c.code
	}
	var re *ranError
	if errors.As(err, &re) {
		return fail(c.out, re.err)
	}
	if errors.Is(err, errNoCommand) {
		return errcode.ExitUsage
	}
	if f := scanFormat(args); f == "json" {
		// cobra may have refused the line before it parsed -o.
		c.out.format = f
	}
	return failUsage(c.out, cmd, err)
}

// scanFormat finds the last -o/--output before "--" in a command line
// cobra refused (an unknown command is refused before any flag is parsed),
// so that the refusal is printed as JSON when JSON was asked for.
func scanFormat(args []string) string {
	format := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return format
		case (a == "-o" || a == "--output") && i+1 < len(args):
			format = args[i+1]
			i++
		case strings.HasPrefix(a, "--output="):
			format = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			format = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	return format
}

// errNoCommand ends a command line without a command, whose help went to
// stdout.
var errNoCommand = errors.New("no command")

// failUsage reports a command line that does not parse.
func failUsage(o *output, cmd *cobra.Command, err error) int {
	msg := strings.TrimSpace(err.Error())
	if o.json() {
		o.print(map[string]any{"error": map[string]string{"code": "USAGE", "message": msg}}, nil)
	} else {
		path := "realmctl"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(o.ew, "realmctl: %s\nRun '%s --help' for usage.\n", msg, path)
	}
	return errcode.ExitUsage
}

// action makes a cobra RunE of a realmctl command: f gets the arguments
// (without "--") and the index of "--" among them (-1: none), and returns
// realmctl's exit status.
func (c *cli) action(f func(ctx context.Context, args []string, dash int) (int, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		code, err := f(cmd.Context(), args, cmd.ArgsLenAtDash())
		if err != nil {
			return &ranError{err}
		}
		c.code = code
		return nil
	}
}

// group makes a command that only holds subcommands: without one, or with
// one it does not know, it is a usage error that names them (with
// suggestions for a typo).
func group(use, short, example string, aliases ...string) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Example: example, Aliases: aliases, Args: cobra.ArbitraryArgs, SuggestionsMinimumDistance: 2}
	g.RunE = func(cmd *cobra.Command, args []string) error {
		var subs []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				subs = append(subs, s.Name())
			}
		}
		if len(args) == 0 {
			return &usageError{fmt.Sprintf("%s needs a subcommand: %s", cmd.Name(), strings.Join(subs, ", "))}
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return &usageError{msg + "\n\nwant one of: " + strings.Join(subs, ", ")}
	}
	return g
}

// newRoot builds realmctl's command tree on c.
func newRoot(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:     "realmctl",
		Short:   "realmctl runs agent sessions on a guarded workspace",
		Long:    longHelp,
		Version: versionString(),
		Example: `  realmctl image init
  realmctl session create --workspace ~/project --name agent-1
  realmctl session exec agent-1 -- make test
  realmctl session ls -o wide
  realmctl audit agent-1 -f
  realmctl session rm agent-1`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No command: the help, and exit 2.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.out.w)
			cmd.Help()
			return errNoCommand
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := c.g.check(); err != nil {
				return &ranError{err}
			}
			c.out.format = c.g.format
			return nil
		},
	}
	root.SetVersionTemplate("realmctl {{.Version}}\n")
	c.g.register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if cmd.HasParent() {
			return &usageError{fmt.Sprintf("%s: %v", strings.TrimPrefix(cmd.CommandPath(), "realmctl "), err)}
		}
		return &usageError{err.Error()}
	})
	root.SuggestionsMinimumDistance = 2

	session := group("session", "create, run commands in, inspect and destroy sessions",
		"  realmctl session create --workspace ~/project --name agent-1\n"+
			"  realmctl session exec agent-1 -- make test\n"+
			"  realmctl session ls\n"+
			"  realmctl session rm agent-1", "sessions")
	session.AddCommand(
		sessionCreateCmd(c),
		sessionExecCmd(c),
		sessionDestroyCmd(c),
		sessionListCmd(c),
		sessionLogsCmd(c),
		sessionInspectCmd(c),
		sessionDiffCmd(c),
		sessionUndoCmd(c),
	)
	image := group("image", "build realm's base image", "  realmctl image init")
	image.AddCommand(imageInitCmd(c))
	root.AddCommand(session, image, reapCmd(c), auditCmd(c), interceptorCmd(c), versionCmd(c))
	return root
}

// exampleCobrasCommands makes cobra's own help and completion commands now
// (cobra would when it runs) and gives them Examples, as every command of
// realmctl's has. The completion commands write to root's output as it is
// now.
func exampleCobrasCommands(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "help":
			cmd.Example = "  realmctl help session exec"
		case "completion":
			cmd.Example = "  source <(realmctl completion bash)\n  realmctl completion zsh > \"${fpath[1]}/_realmctl\""
			for _, sh := range cmd.Commands() {
				switch sh.Name() {
				case "bash", "zsh":
					sh.Example = "  source <(realmctl completion " + sh.Name() + ")"
				case "fish":
					sh.Example = "  realmctl completion fish | source"
				default:
					sh.Example = "  realmctl completion " + sh.Name() + " | Out-String | Invoke-Expression"
				}
			}
		}
	}
}

func versionCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print realmctl's version",
		Example: "  realmctl version\n  realmctl -o json version",
		Args:    noArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			c.out.print(map[string]string{"version": versionString()}, func(w io.Writer) {
				fmt.Fprintf(w, "realmctl %s\n", versionString())
			})
			return 0, nil
		}),
	}
}

// noArgs refuses arguments as the other commands do: SCHEMA_INVALID.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &ranError{usageErr("%s takes no arguments", cmd.CommandPath())}
	}
	return nil
}
