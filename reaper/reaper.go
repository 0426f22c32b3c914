// Package reaper cleans up after crashes: the containers, OpenShell
// sandboxes, realmfs mounts and session records of sessions that are no
// longer alive. Its order is what makes it crash-safe: sandboxes and
// containers first, proven gone by listing again, then mounts, and the
// records last, so a crash during a reap leaves the records the next reap
// needs. A container that survives removal stops the reap with
// REALM_STOPPING before any record is deleted.
//
// Reap and Sweep take everything they act on as values (Containers, Store,
// Mounts, Sandboxes), and the tests drive them with recording fakes. The
// package imports no runtime of package sandbox and not fusefs; its Libpod
// (Containers over the libpod API, libpod.go) imports the podman bindings,
// and StateMounts (mounts.go) reads the mount table.
//
// Precondition: the caller holds the state dir's lock (LockStateDir), so no
// other realmctl is creating or destroying a session meanwhile.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox/label"
)

// Container is one realm-managed container as the sweep sees it.
type Container struct {
	ID      string
	Name    string
	Session string // the session id it belongs to, "" if unknown
}

// Containers is the container engine as the sweep needs it.
type Containers interface {
	// List returns every realm-managed container, in all states.
	List(ctx context.Context) ([]Container, error)
	// Remove force-removes one; one already gone counts as removed.
	Remove(ctx context.Context, id string) error
}

// Store is the session records as the reaper needs them.
type Store interface {
	// List returns the ids of all records by file name, parsing none.
	List() ([]string, error)
	// Delete removes one record; one already gone counts as deleted.
	Delete(id string) error
}

// Mounts is the realmfs mounts under the state dir.
type Mounts interface {
	// List returns their mountpoints, dead ones included.
	List() ([]string, error)
	// Unmount detaches one lazily; a dead daemon must not stop it.
	Unmount(mnt string) error
}

// Sandboxes is the hook for runtimes that keep sandboxes of their own
// (OpenShell: `openshell sandbox list -o json` / `sandbox delete`). It is
// sandbox.SandboxSweeper; the command wires every runtime that has one.
type Sandboxes interface {
	ListSandboxes(ctx context.Context) ([]string, error)
	DeleteSandbox(ctx context.Context, name string) error
}

// Config is one reap.
type Config struct {
	// Containers is the container engine; nil when there is none to ask
	// (no Podman service answers and no session record names Podman: the
	// caller decides, see cmd/realmctl). Then no container is swept.
	Containers Containers
	Store      Store
	Mounts     Mounts      // nil: no mount cleanup
	Sandboxes  []Sandboxes // OpenShell and the like; may be empty
	// Keep names the sessions that are alive: their containers, sandboxes
	// and records are left alone. Empty for a full reap.
	Keep map[string]bool
	// KeepMounts names the mountpoints live sessions use.
	KeepMounts map[string]bool
}

// Report is what a reap removed.
type Report struct {
	SandboxesDeleted  int `json:"sandboxesDeleted,omitempty"`
	ContainersRemoved int `json:"containersRemoved"`
	RecordsDeleted    int `json:"recordsDeleted"`
	MountsCleaned     int `json:"mountsCleaned"`
}

// Reap cleans up everything that belongs to no kept session. See the
// package comment for the order and why.
func Reap(ctx context.Context, c Config) (Report, error) {
	var r Report
	for _, s := range c.Sandboxes {
		n, err := deleteSandboxes(ctx, s, c.Keep)
		r.SandboxesDeleted += n
		if err != nil {
			return r, err
		}
	}
	if c.Containers != nil {
		n, err := Sweep(ctx, c.Containers, c.Keep)
		r.ContainersRemoved = n
		if err != nil {
			return r, err
		}
	}
	var mountErr error
	if c.Mounts != nil {
		r.MountsCleaned, mountErr = cleanMounts(c.Mounts, c.KeepMounts)
	}
	ids, err := c.Store.List()
	if err != nil {
		return r, errors.Join(fmt.Errorf("list session records: %w", err), mountErr)
	}
	for _, id := range ids {
		if c.Keep[id] {
			continue
		}
		if err := c.Store.Delete(id); err != nil {
			return r, errors.Join(fmt.Errorf("delete session record %s: %w", id, err), mountErr)
		}
		r.RecordsDeleted++
	}
	return r, mountErr
}

// Sweep force-removes every listed container not of a kept session, then
// lists again to prove none of them is left. Any survivor is REALM_STOPPING.
// It returns how many it removed; a second sweep returns 0.
func Sweep(ctx context.Context, cs Containers, keep map[string]bool) (int, error) {
	before, err := cs.List(ctx)
	if err != nil {
		return 0, errcode.Wrap(errcode.RealmStopping, err, "could not list realm's containers; nothing was removed")
	}
	removed := 0
	var failed []error
	for _, c := range before {
		if keep[c.Session] {
			continue
		}
		if err := cs.Remove(ctx, c.ID); err != nil {
			failed = append(failed, err)
			continue
		}
		removed++
	}
	after, err := cs.List(ctx)
	if err != nil {
		return removed, errcode.Wrap(errcode.RealmStopping, err,
			"could not list realm's containers again to prove them gone; no record was deleted")
	}
	var survivors []string
	for _, c := range after {
		if !keep[c.Session] {
			survivors = append(survivors, shortID(c.ID))
		}
	}
	if len(survivors) > 0 {
		sort.Strings(survivors)
		return removed, errcode.Wrap(errcode.RealmStopping, errors.Join(failed...),
			"%d container(s) survived removal (%s); no record was deleted", len(survivors), strings.Join(survivors, ", "))
	}
	return removed, nil
}

func deleteSandboxes(ctx context.Context, s Sandboxes, keep map[string]bool) (int, error) {
	names, err := s.ListSandboxes(ctx)
	if err != nil {
		return 0, errcode.Wrap(errcode.RealmStopping, err, "could not list realm's sandboxes; no record was deleted")
	}
	n := 0
	for _, name := range names {
		id, ok := label.SessionOf(name)
		if !ok || keep[id] {
			continue
		}
		if err := s.DeleteSandbox(ctx, name); err != nil {
			return n, errcode.Wrap(errcode.RealmStopping, err, "could not delete sandbox %s; no record was deleted", name)
		}
		n++
	}
	return n, nil
}

// cleanMounts detaches every listed mount no live session uses. A failure
// is reported but does not stop the others.
func cleanMounts(ms Mounts, keep map[string]bool) (int, error) {
	mnts, err := ms.List()
	if err != nil {
		return 0, fmt.Errorf("list realmfs mounts: %w", err)
	}
	n := 0
	var errs []error
	for _, mnt := range mnts {
		if keep[mnt] {
			continue
		}
		if err := ms.Unmount(mnt); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mnt, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
