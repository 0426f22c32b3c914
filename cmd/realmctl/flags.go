package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"realm/errcode"
)

// globals are the flags every command takes, before or after its name.
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

// errHelp ends a command that printed its help.
var errHelp = errors.New("help shown")

// usageErr is a bad command line: SCHEMA_INVALID, exit 2.
func usageErr(format string, args ...any) error {
	return errcode.New(errcode.SchemaInvalid, format, args...)
}

// subFlags is a subcommand's flag set; it takes the global flags too.
func subFlags(g *globals, name, synopsis string, stdout io.Writer) (*pflag.FlagSet, *bool) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: realmctl %s\n\nFlags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	return fs, help
}

// parse parses args into fs, printing help if asked.
func parse(fs *pflag.FlagSet, help *bool, g *globals, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	if *help {
		fs.Usage()
		return errHelp
	}
	if g.format != "text" && g.format != "json" {
		return usageErr("-o %q: want text or json", g.format)
	}
	return nil
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
