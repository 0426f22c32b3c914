package sandbox

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox/label"
)

// RuntimeOptions is what the command line gives every runtime.
type RuntimeOptions struct {
	PodmanSocket string // libpod API URI
	StateDir     string // realmctl's state dir
}

// RuntimeFactory makes a Runtime. It is called only when the runtime is
// used, so a runtime whose tools are missing costs nothing until then.
type RuntimeFactory func(ctx context.Context, opts RuntimeOptions) (Runtime, error)

// SandboxSweeper is implemented by runtimes that keep sandboxes of their own
// beside the containers (OpenShell's gateway restarts what it knows). The
// reaper deletes every one named "realm-<id>" that its own state dir made
// (label.State) and that belongs to no live session, before it sweeps the
// containers.
type SandboxSweeper interface {
	// ListSandboxes returns the runtime's sandboxes whose names start
	// with "realm-", with their State labels.
	ListSandboxes(ctx context.Context) ([]label.Sandbox, error)
	// DeleteSandbox deletes one; one already gone counts as deleted.
	DeleteSandbox(ctx context.Context, name string) error
}

// Prober is implemented by runtimes that can tell whether a sandbox still
// runs; a session whose sandbox does not is dead and reaped.
type Prober interface {
	Running(ctx context.Context, id string) (bool, error)
}

var (
	runtimesMu sync.Mutex
	runtimes   = map[string]RuntimeFactory{
		"podman": func(ctx context.Context, o RuntimeOptions) (Runtime, error) {
			state, err := stateLabel(o.StateDir)
			if err != nil {
				return nil, err
			}
			p, err := ConnectPodman(ctx, o.PodmanSocket)
			if err != nil {
				return nil, err
			}
			p.StateLabel = state
			return p, nil
		},
	}
)

// stateLabel is the label.State value of the sandboxes made for stateDir,
// "" when there is no state dir (a runtime made outside realmctl).
func stateLabel(stateDir string) (string, error) {
	if stateDir == "" {
		return "", nil
	}
	id, err := label.StateID(stateDir)
	if err != nil {
		return "", fmt.Errorf("identity of state dir %s: %w", stateDir, err)
	}
	return id, nil
}

// egressEnforced names the runtimes that enforce an egress allowlist
// themselves (OpenShell's network policy). Podman cannot: a container with
// a network reaches every host. A create that asks one of the others for
// egress is refused (Validate) rather than given a network the allowlist
// does not bound: a sandbox never gets wider than it was told.
var egressEnforced = map[string]bool{"openshell": true}

// EnforcesEgress reports whether the runtime called name enforces an
// egress allowlist.
func EnforcesEgress(name string) bool { return egressEnforced[name] }

// RegisterRuntime makes a runtime known to --runtime. The OpenShell runtime
// registers itself here from an init function in its own file.
func RegisterRuntime(name string, f RuntimeFactory) {
	runtimesMu.Lock()
	defer runtimesMu.Unlock()
	runtimes[name] = f
}

// HasRuntime reports whether name is registered.
func HasRuntime(name string) bool {
	runtimesMu.Lock()
	defer runtimesMu.Unlock()
	_, ok := runtimes[name]
	return ok
}

// RuntimeNames lists the registered runtimes, sorted.
func RuntimeNames() []string {
	runtimesMu.Lock()
	defer runtimesMu.Unlock()
	var names []string
	for n := range runtimes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewRuntime makes the runtime called name.
func NewRuntime(ctx context.Context, name string, opts RuntimeOptions) (Runtime, error) {
	runtimesMu.Lock()
	f, ok := runtimes[name]
	runtimesMu.Unlock()
	if !ok {
		return nil, errcode.New(errcode.SchemaInvalid, "unknown runtime %q", name)
	}
	return f(ctx, opts)
}
