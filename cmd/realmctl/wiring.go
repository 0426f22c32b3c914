package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"realm/reaper"
	"realm/sandbox"
)

// app wires the packages for one command.
type app struct {
	g        *globals
	mgr      *sandbox.Manager
	mu       sync.Mutex
	runtimes map[string]sandbox.Runtime
}

func newApp(g *globals) (*app, error) {
	a := &app{g: g, runtimes: map[string]sandbox.Runtime{}}
	if g.openshell != "" {
		sandbox.UseOpenShellBinary(g.openshell)
	}
	realmfs, err := g.realmfsPath()
	if err != nil {
		realmfs = "realmfs" // only create needs it; it fails there, clearly
	}
	a.mgr = &sandbox.Manager{
		Store:   sandbox.NewStore(g.stateDir),
		Mounts:  sandbox.NewMounts(g.stateDir, realmfs),
		Runtime: a.runtime,
	}
	return a, nil
}

// runtime makes each runtime once, on first use.
func (a *app) runtime(ctx context.Context, name string) (sandbox.Runtime, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if rt, ok := a.runtimes[name]; ok {
		return rt, nil
	}
	rt, err := sandbox.NewRuntime(ctx, name, sandbox.RuntimeOptions{PodmanSocket: a.g.podmanSocket, StateDir: a.g.stateDir})
	if err != nil {
		return nil, err
	}
	a.runtimes[name] = rt
	return rt, nil
}

// lock takes the state dir for this command.
func (a *app) lock() (*reaper.StateLock, error) {
	return reaper.LockStateDir(a.g.stateDir, a.g.lockWait)
}

// reap runs the reaper; the caller holds the lock. Unless all, the live
// sessions (and their mounts) are kept.
func (a *app) reap(ctx context.Context, all bool) (reaper.Report, error) {
	podman, err := a.runtime(ctx, "podman")
	if err != nil {
		return reaper.Report{}, err
	}
	p, ok := podman.(*sandbox.Podman)
	if !ok {
		return reaper.Report{}, errors.New("the podman runtime is not realm's Podman runtime")
	}
	cfg := reaper.Config{
		Containers: reaper.Libpod{Conn: p.Conn()},
		Store:      a.mgr.Store,
		Mounts:     reaper.StateMounts{Dir: a.g.stateDir},
		Sandboxes:  a.sandboxSweepers(ctx),
	}
	if !all {
		cfg.Keep, cfg.KeepMounts, err = a.mgr.Live(ctx)
		if err != nil {
			return reaper.Report{}, fmt.Errorf("tell live sessions from dead ones: %w", err)
		}
	}
	return reaper.Reap(ctx, cfg)
}

// sandboxSweepers is the OpenShell hook: every registered runtime that keeps
// sandboxes of its own (sandbox.SandboxSweeper) has them reaped. A runtime
// that cannot be made here (its CLI is not installed) has no sandboxes.
func (a *app) sandboxSweepers(ctx context.Context) []reaper.Sandboxes {
	var out []reaper.Sandboxes
	for _, name := range sandbox.RuntimeNames() {
		rt, err := a.runtime(ctx, name)
		if err != nil {
			continue
		}
		if s, ok := rt.(sandbox.SandboxSweeper); ok {
			out = append(out, s)
		}
	}
	return out
}
