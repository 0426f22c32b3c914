package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/realm-dev/realm/reaper"
	"github.com/realm-dev/realm/sandbox"
	"github.com/realm-dev/realm/sandbox/label"
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
	// Always set: "" looks the CLI up on PATH, so an earlier app's
	// --openshell never leaks into this one.
	sandbox.UseOpenShellBinary(g.openshell)
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
	rt, err := sandbox.NewRuntime(ctx, name, sandbox.RuntimeOptions{PodmanSocket: a.g.podman().URI, StateDir: a.g.stateDir})
	if err != nil {
		return nil, err
	}
	a.runtimes[name] = rt
	return rt, nil
}

// resolveOne is the app and the record of the one session args names
// (verb: the session command, for its usage error).
func resolveOne(g *globals, args []string, verb string) (*app, *sandbox.Record, error) {
	if len(args) != 1 {
		return nil, nil, usageErr("session %s wants one session id or name", verb)
	}
	a, err := newApp(g)
	if err != nil {
		return nil, nil, err
	}
	rec, err := a.mgr.Resolve(args[0])
	if err != nil {
		return nil, nil, err
	}
	return a, rec, nil
}

// lockedApp is the preamble of every command that changes the state dir
// (create, destroy, reap): the app, and the state dir's lock, held until
// unlock is called.
func lockedApp(g *globals) (a *app, unlock func(), err error) {
	a, err = newApp(g)
	if err != nil {
		return nil, nil, err
	}
	lock, err := reaper.LockStateDir(g.stateDir, g.lockWait)
	if err != nil {
		return nil, nil, err
	}
	return a, func() { lock.Unlock() }, nil
}

// reap runs the reaper; the caller holds the lock. Unless all, the live
// sessions (and their mounts) are kept. Only this state dir's sandboxes and
// containers are removed (label.State; see package reaper); all also
// removes those with no state label that no record names.
//
// Each runtime is asked only if it is there (the Podman service answers,
// the OpenShell CLI is found) or if a session record names it; a runtime a
// record names that is not there fails the reap before anything is removed,
// since that session could not be told alive or dead. An unreadable record
// names no runtime (see sandbox.Manager.NamedRuntimes). So an OpenShell
// host needs no Podman service, and a Podman host no OpenShell CLI.
func (a *app) reap(ctx context.Context, all bool) (reaper.Report, error) {
	named, err := a.mgr.NamedRuntimes()
	if err != nil {
		return reaper.Report{}, err
	}
	state, err := label.StateID(a.g.stateDir)
	if err != nil {
		return reaper.Report{}, fmt.Errorf("identity of state dir %s: %w", a.g.stateDir, err)
	}
	cfg := reaper.Config{
		Store:  a.mgr.Store,
		Mounts: reaper.StateMounts{Dir: a.g.stateDir},
		State:  state,
		All:    all,
	}
	for _, name := range sandbox.RuntimeNames() {
		rt, err := a.runtime(ctx, name)
		if err != nil {
			if named[name] {
				return reaper.Report{}, fmt.Errorf("reap: a session record names the %s runtime, which cannot be reached; nothing was removed: %w", name, err)
			}
			continue // not there, and nothing of realm's can be in it
		}
		if p, ok := rt.(*sandbox.Podman); ok {
			cfg.Containers = reaper.Libpod{Conn: p.Conn()}
		}
		if s, ok := rt.(sandbox.SandboxSweeper); ok {
			cfg.Sandboxes = append(cfg.Sandboxes, s)
		}
	}
	if !all {
		cfg.Keep, cfg.KeepMounts, err = a.mgr.Live(ctx)
		if err != nil {
			return reaper.Report{}, fmt.Errorf("tell live sessions from dead ones: %w", err)
		}
	}
	return reaper.Reap(ctx, cfg)
}
