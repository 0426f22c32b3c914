package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"realm/errcode"
)

// globals are the flags every command takes, anywhere before "--".
type globals struct {
	stateDir     string
	podmanSocket string
	format       string
	noReap       bool
	realmfs      string
	openshell    string
	lockWait     time.Duration
}

func newGlobals() *globals {
	return &globals{
		stateDir:     "/var/lib/realm",
		podmanSocket: "unix:///run/podman/podman.sock",
		format:       "text",
		lockWait:     10 * time.Second,
	}
}

// register adds the global flags to fs with their current values as
// defaults, so that a subcommand's flag set keeps what the top level parsed.
func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.stateDir, "state-dir", g.stateDir, "where session records, mounts and the lock live")
	fs.StringVar(&g.podmanSocket, "podman-socket", g.podmanSocket, "the libpod API service")
	fs.StringVarP(&g.format, "output", "o", g.format, "output format: text or json")
	fs.BoolVar(&g.noReap, "no-reap", g.noReap, "do not reap dead sessions' leftovers before session create")
	fs.StringVar(&g.realmfs, "realmfs", g.realmfs, "the realmfs binary (default: next to realmctl, else on PATH)")
	fs.DurationVar(&g.lockWait, "lock-wait", g.lockWait, "how long to wait for another realmctl to release the state dir")
	fs.StringVar(&g.openshell, "openshell", g.openshell, "the openshell CLI for --runtime openshell (default: openshell on PATH)")
}

// defaultRuntime is openshell when its CLI is there (--openshell, or on
// PATH), podman otherwise.
func (g *globals) defaultRuntime() string {
	if g.openshell != "" {
		return "openshell"
	}
	if _, err := exec.LookPath("openshell"); err == nil {
		return "openshell"
	}
	return "podman"
}

// errHelp ends a command line that printed its help.
var errHelp = errors.New("help shown")

// usageErr is a bad command line: SCHEMA_INVALID, exit 2.
func usageErr(format string, args ...any) error {
	return errcode.New(errcode.SchemaInvalid, format, args...)
}

// runner runs a command once its command line is parsed; fs holds its
// flags and arguments. It returns realmctl's exit status when it succeeds.
type runner func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error)

// command is one realmctl command.
type command struct {
	words    string // "session create"
	synopsis string // after "realmctl " in its help
	// define adds the command's own flags to fs and returns its runner,
	// which reads them.
	define func(fs *pflag.FlagSet) runner
}

// commands are every realmctl command. A command of two words is reached
// through its first word, a group ("session", "image").
var commands = []*command{
	{"session create", "session create --workspace DIR [flags] [-- WORKLOAD ARGV...]", sessionCreateCmd},
	{"session exec", "session exec ID|NAME [--timeout 30s] [--workdir DIR] -- ARGV...", sessionExecCmd},
	{"session destroy", "session destroy ID|NAME", sessionDestroyCmd},
	{"session list", "session list", sessionListCmd},
	{"image init", "image init [--busybox PATH]", imageInitCmd},
	{"reap", "reap [--all]", reapCmd},
	{"openshell-interceptor", "openshell-interceptor --listen unix:///PATH", interceptorCmd},
	{"help", "help", helpCmd},
}

func findCommand(words string) *command {
	for _, c := range commands {
		if c.words == words {
			return c
		}
	}
	return nil
}

// subcommands lists the commands under group, "" if it is no group.
func subcommands(group string) string {
	var subs []string
	for _, c := range commands {
		if rest, ok := strings.CutPrefix(c.words, group+" "); ok {
			subs = append(subs, rest)
		}
	}
	return strings.Join(subs, ", ")
}

// invocation is a parsed command line.
type invocation struct {
	g     *globals
	cmd   *command // nil: no command was given
	flags *pflag.FlagSet
	run   runner
}

// parseCommandLine reads args as realmctl's command line. The global flags
// are taken wherever they stand before "--": before the command, between
// the words of a two-word command, or among the command's own flags and
// arguments; a later one wins. Everything after "--" stays an argument.
//
// The invocation is returned even with an error, so that the error can be
// printed in the format (-o) given so far. errHelp means help was printed.
func parseCommandLine(args []string, stdout io.Writer) (*invocation, error) {
	g := newGlobals()
	inv := &invocation{g: g}
	var words []string
	rest := args
	for inv.cmd == nil {
		// Up to the next command word: only global flags may stand here.
		fs := pflag.NewFlagSet("realmctl", pflag.ContinueOnError)
		fs.SetInterspersed(false)
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
		g.register(fs)
		help := fs.BoolP("help", "h", false, "show this help")
		if err := fs.Parse(rest); err != nil {
			return inv, usageErr("%v", err)
		}
		if err := g.check(); err != nil {
			return inv, err
		}
		if *help {
			printUsage(stdout)
			return inv, errHelp
		}
		if fs.ArgsLenAtDash() == 0 {
			return inv, usageErr("a command must come before --; see realmctl --help")
		}
		if fs.NArg() == 0 {
			if len(words) == 0 {
				return inv, nil
			}
			return inv, usageErr("%s needs a subcommand: %s", words[0], subcommands(words[0]))
		}
		words = append(words, fs.Arg(0))
		rest = fs.Args()[1:]
		key := strings.Join(words, " ")
		if c := findCommand(key); c != nil {
			inv.cmd = c
			break
		}
		if len(words) == 1 && subcommands(key) != "" {
			continue
		}
		if len(words) == 1 {
			return inv, usageErr("unknown command %q (want session, image, reap or openshell-interceptor; see realmctl --help)", key)
		}
		return inv, usageErr("unknown %s subcommand %q (want %s)", words[0], words[1], subcommands(words[0]))
	}

	// The command's own flags, with the global flags among them.
	fs := pflag.NewFlagSet(inv.cmd.words, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	run := inv.cmd.define(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: realmctl %s\n\nFlags (global flags too, anywhere before --):\n", inv.cmd.synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(rest); err != nil {
		return inv, usageErr("%s: %v", inv.cmd.words, err)
	}
	if err := g.check(); err != nil {
		return inv, err
	}
	if *help {
		fs.Usage()
		return inv, errHelp
	}
	inv.flags, inv.run = fs, run
	return inv, nil
}

// check refuses global flag values that no command can use.
func (g *globals) check() error {
	if g.format != "text" && g.format != "json" {
		return usageErr("-o %q: want text or json", g.format)
	}
	return nil
}

func helpCmd(fs *pflag.FlagSet) runner {
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		printUsage(out.w)
		return 0, nil
	}
}

// realmfsPath finds the realmfs binary: --realmfs, else beside realmctl,
// else on PATH.
func (g *globals) realmfsPath() (string, error) {
	if g.realmfs != "" {
		return g.realmfs, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "realmfs")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("realmfs")
	if err != nil {
		return "", errors.New("realmfs not found next to realmctl nor on PATH; give --realmfs")
	}
	return p, nil
}
