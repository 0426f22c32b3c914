package main

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox"
)

// globals are the flags every command takes, anywhere before "--": they are
// the root command's persistent flags, which cobra parses wherever they
// stand among a command's words, flags and arguments.
type globals struct {
	stateDir     string
	podmanSocket string
	connection   string
	format       string
	noReap       bool
	realmfs      string
	openshell    string
	lockWait     time.Duration
}

func newGlobals() *globals {
	return &globals{
		stateDir: defaultStateDir(os.Geteuid(), os.Getenv),
		format:   "text",
		lockWait: 10 * time.Second,
	}
}

// rootStateDir is root's state dir.
const rootStateDir = "/var/lib/realm"

// defaultStateDir is the state dir without --state-dir: $REALM_STATE_DIR
// when set (for anyone); root's /var/lib/realm; for a normal user, who
// cannot write there, $XDG_STATE_HOME/realm, else ~/.local/state/realm (the
// XDG base directory spec's state dir: sessions, mounts and logs are state
// that outlives a command but is no one's data).
func defaultStateDir(euid int, getenv func(string) string) string {
	if d := getenv("REALM_STATE_DIR"); d != "" {
		return d
	}
	if euid == 0 {
		return rootStateDir
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "realm")
	}
	home := getenv("HOME")
	if home == "" {
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	return filepath.Join(home, ".local", "state", "realm")
}

// register adds the global flags to fs with their current values as
// defaults.
func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.stateDir, "state-dir", g.stateDir, "where session records, mounts and the lock live (default: $REALM_STATE_DIR; else root's "+rootStateDir+", a user's $XDG_STATE_HOME/realm or ~/.local/state/realm)")
	fs.StringVar(&g.podmanSocket, "podman-socket", g.podmanSocket, "the libpod API service, unix:///PATH (wins over --connection, CONTAINER_HOST and the default sockets)")
	fs.StringVar(&g.connection, "connection", g.connection, "the Podman service as a unix:// URL, as podman --url takes it (default: CONTAINER_HOST, else this user's service: root's "+sandbox.RootPodmanSocket+", a user's $XDG_RUNTIME_DIR/podman/podman.sock)")
	fs.StringVarP(&g.format, "output", "o", g.format, "output format: text, wide (more columns), json or yaml")
	fs.BoolVar(&g.noReap, "no-reap", g.noReap, "do not reap dead sessions' leftovers before session create")
	fs.StringVar(&g.realmfs, "realmfs", g.realmfs, "the realmfs binary (default: next to realmctl, else on PATH)")
	fs.DurationVar(&g.lockWait, "lock-wait", g.lockWait, "how long to wait for another realmctl to release the state dir")
	fs.StringVar(&g.openshell, "openshell", g.openshell, "the openshell CLI for --runtime openshell (default: openshell on PATH)")
}

// podman is the Podman service this command line names, found as podman
// finds it (see sandbox.DiscoverPodman).
func (g *globals) podman() sandbox.PodmanEndpoint {
	return sandbox.DiscoverPodman(sandbox.PodmanLookup{
		Socket:     g.podmanSocket,
		Connection: g.connection,
		Euid:       os.Geteuid(),
	})
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

// usageErr is a request realm refuses: SCHEMA_INVALID, exit 2. (A command
// line that does not parse is a usageError instead; see cli.go.)
func usageErr(format string, args ...any) error {
	return errcode.New(errcode.SchemaInvalid, format, args...)
}

// check refuses global flag values that no command can use.
func (g *globals) check() error {
	if !slices.Contains(formats, g.format) {
		return usageErr("-o %q: want one of %s", g.format, strings.Join(formats, ", "))
	}
	// The service binds the realmfs mount into its containers: it must
	// run on this host, so only a unix socket will do.
	for _, f := range []struct{ name, v string }{{"--connection", g.connection}, {"--podman-socket", g.podmanSocket}} {
		if f.v != "" && !strings.HasPrefix(f.v, "unix:///") {
			return usageErr("%s %q: want unix:///PATH (the service must run on this host to bind the workspace's mount)", f.name, f.v)
		}
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
