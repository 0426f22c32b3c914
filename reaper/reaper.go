// Package reaper cleans up after crashes: the containers, OpenShell
// sandboxes, realmfs mounts and session records of sessions that are no
// longer alive. Its order is what makes it crash-safe: sandboxes and
// containers first, proven gone by listing again, then mounts, and the
// records last, so a crash during a reap leaves the records the next reap
// needs. A container that survives removal stops the reap with
// REALM_STOPPING before any record is deleted.
//
// One Podman service or OpenShell gateway serves several state dirs, and a
// state dir knows only its own sessions alive or dead, so a reap removes
// only its own: containers and sandboxes whose io.realm.state label is its
// state dir's identity (label.StateID), or that have no label but a record
// in it. One with another state dir's label is never touched; one with no
// label and no record here (made by an older realmctl) is left and reported
// (Report.Unlabelled) unless Config.All. An OpenShell podman-driver
// container carries no realm label: it goes with its sandbox's.
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
	"cmp"
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
	State   string // its label.State: the state dir that made it, "" if none
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
	ListSandboxes(ctx context.Context) ([]label.Sandbox, error)
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
	// State is this state dir's label.StateID. Only sandboxes and
	// containers labelled with it (or, with no label, of a session that
	// has a record here) are this state dir's to remove: one runtime
	// serves several state dirs, and each knows only its own sessions.
	State string
	// All also removes sandboxes and containers with no state label that
	// no record here names (made by a realmctl before the label, so of no
	// known state dir). Without All they are left and reported.
	All bool
	// Keep names the sessions that are alive: their containers, sandboxes
	// and records are left alone. Empty for a full reap.
	Keep map[string]bool
	// KeepMounts names the mountpoints live sessions use.
	KeepMounts map[string]bool
}

// Report is what a reap removed, and what it left because no state dir
// owns it (Unlabelled: "sandbox NAME" or "container NAME").
type Report struct {
	SandboxesDeleted  int      `json:"sandboxesDeleted,omitempty"`
	ContainersRemoved int      `json:"containersRemoved"`
	RecordsDeleted    int      `json:"recordsDeleted"`
	MountsCleaned     int      `json:"mountsCleaned"`
	Unlabelled        []string `json:"unlabelledLeft,omitempty"`
}

// verdict is what a reap does with one sandbox or container.
type verdict int

const (
	remove     verdict = iota // this state dir's, of no live session
	keepLive                  // this state dir's, of a live session
	foreign                   // another state dir's: never touched
	unlabelled                // no state label, no record here: left, reported
)

// scope tells this state dir's sandboxes and containers from others'.
type scope struct {
	state   string
	all     bool
	keep    map[string]bool
	records map[string]bool   // sessions with a record here
	owners  map[string]string // session -> state label, from the sandboxes
}

// judge decides for an object of session labelled state ("" none).
func (s *scope) judge(session, state string) verdict {
	if state == "" {
		state = s.owners[session] // an OpenShell container: its sandbox's label
	}
	switch {
	case state == "" && s.records[session] && session != "":
		// Made here before the label: the record says so.
	case state == "":
		if !s.all {
			return unlabelled
		}
	case state != s.state:
		return foreign
	}
	if s.keep[session] {
		return keepLive
	}
	return remove
}

// Reap cleans up everything of this state dir that belongs to no kept
// session. See the package comment for the order and why.
func Reap(ctx context.Context, c Config) (Report, error) {
	var r Report
	ids, err := c.Store.List()
	if err != nil {
		return r, fmt.Errorf("list session records: %w; nothing was removed", err)
	}
	sc := &scope{state: c.State, all: c.All, keep: c.Keep, records: map[string]bool{}, owners: map[string]string{}}
	for _, id := range ids {
		sc.records[id] = true
	}
	for _, s := range c.Sandboxes {
		n, err := deleteSandboxes(ctx, s, sc, &r)
		r.SandboxesDeleted += n
		if err != nil {
			return r, err
		}
	}
	if c.Containers != nil {
		n, err := sweep(ctx, c.Containers, sc, &r)
		r.ContainersRemoved = n
		if err != nil {
			return r, err
		}
	}
	var mountErr error
	if c.Mounts != nil {
		r.MountsCleaned, mountErr = cleanMounts(c.Mounts, c.KeepMounts)
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

// sweep force-removes every listed container sc judges remove, then lists
// again to prove none of them is left. Any survivor is REALM_STOPPING. It
// returns how many it removed; a second sweep returns 0. Unlabelled
// containers are added to r.Unlabelled.
func sweep(ctx context.Context, cs Containers, sc *scope, r *Report) (int, error) {
	before, err := cs.List(ctx)
	if err != nil {
		return 0, errcode.Wrap(errcode.RealmStopping, err, "could not list realm's containers; nothing was removed")
	}
	removed := 0
	var failed []error
	for _, c := range before {
		switch sc.judge(c.Session, c.State) {
		case unlabelled:
			r.Unlabelled = append(r.Unlabelled, "container "+cmp.Or(c.Name, shortID(c.ID)))
			continue
		case remove:
		default:
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
		if sc.judge(c.Session, c.State) == remove {
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

// deleteSandboxes deletes the listed sandboxes sc judges remove, and notes
// each sandbox's state label in sc.owners for the sweep of their
// containers.
func deleteSandboxes(ctx context.Context, s Sandboxes, sc *scope, r *Report) (int, error) {
	sbs, err := s.ListSandboxes(ctx)
	if err != nil {
		return 0, errcode.Wrap(errcode.RealmStopping, err, "could not list realm's sandboxes; no record was deleted")
	}
	var mine []string
	for _, sb := range sbs {
		id, ok := label.SessionOf(sb.Name)
		if !ok {
			continue
		}
		if sb.State != "" {
			sc.owners[id] = sb.State
		}
		switch sc.judge(id, sb.State) {
		case remove:
			mine = append(mine, sb.Name)
		case unlabelled:
			r.Unlabelled = append(r.Unlabelled, "sandbox "+sb.Name)
		}
	}
	n := 0
	for _, name := range mine {
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
