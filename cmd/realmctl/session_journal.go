package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/fusefs/audit"
	"github.com/realm-dev/realm/sandbox"
)

// session diff and session undo: the journal of the session's mount
// (realmfs journal diff|undo, docs/JOURNAL.md), for the owner its
// container is (lockowner=cgroup: cgroup:…/libpod-ID.scope).

func sessionDiffCmd(c *cli) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "diff ID|NAME [--since TIME]",
		Short: "show what a session's sandbox changed in the workspace",
		Long: `session diff shows every change the session's sandbox made through the
workspace's mount, as realmfs journal diff does: for each path, its state
before the session's first change to it against the workspace now (a
unified diff of text files; files, directories and symlinks created and
deleted; renames; mode and owner changes). Session mounts keep a journal
(-o journal=on); the session's changes are those of the lock owner its
container is. --since narrows the window (RFC3339, or a duration: 10m).`,
		Example: `  realmctl session diff agent-1
  realmctl session diff 3f2a9c1b7d4e --since 30m`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return sessionJournal(ctx, c.g, c.out, args, "diff", since, false)
		}),
	}
	cmd.Flags().StringVar(&since, "since", "", "only the changes made at or after `TIME` (RFC3339, or a duration before now: 10m)")
	return cmd
}

func sessionUndoCmd(c *cli) *cobra.Command {
	var since string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "undo ID|NAME [--since TIME] [--dry-run]",
		Short: "put back what a session's sandbox changed in the workspace",
		Long: `session undo puts every path the session's sandbox changed back as it was
before its first change, newest change first, as realmfs journal undo does
(through the mount's daemon, under its lock table). A path another owner
(a person, another session) changed after the session, or one open for
writing, is left as it is and listed as a conflict: exit status 1. Undo's
own changes are journaled, so that an undo can be undone with realmfs
journal undo --owner undo:OWNER.`,
		Example: `  realmctl session undo agent-1 --dry-run
  realmctl session undo agent-1
  realmctl session undo agent-1 --since 2026-12-03T17:00:00Z`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return sessionJournal(ctx, c.g, c.out, args, "undo", since, dryRun)
		}),
	}
	cmd.Flags().StringVar(&since, "since", "", "only the changes made at or after `TIME` (RFC3339, or a duration before now: 10m)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be undone, change nothing")
	return cmd
}

// sessionJournal runs realmfs journal VERB on the session's mount for
// each owner of the journal that is the session's container.
func sessionJournal(ctx context.Context, g *globals, out *output, args []string, verb, since string, dryRun bool) (int, error) {
	_, rec, err := resolveOne(g, args, verb)
	if err != nil {
		return 0, err
	}
	if rec.ContainerID == nil || *rec.ContainerID == "" {
		return 0, fmt.Errorf("session %s has no container id (runtime %s): its changes cannot be told from others' in the journal", rec.ID, rec.Runtime)
	}
	realmfs, err := g.realmfsPath()
	if err != nil {
		return 0, err
	}
	target := rec.Mount
	if !sandbox.Alive(target) {
		target = rec.Workspace // unmounted: realmfs reads (and undoes in) BACKING itself
	}
	owners, err := sessionOwners(ctx, realmfs, target, *rec.ContainerID)
	if err != nil {
		return 0, err
	}
	if len(owners) == 0 {
		out.note("session %s: the journal of %s records no change of its container", rec.ID, rec.Workspace)
		return 0, nil
	}
	code := 0
	for _, owner := range owners {
		argv := []string{"journal", verb, target, "--owner", owner}
		if since != "" {
			argv = append(argv, "--since", since)
		}
		if dryRun {
			argv = append(argv, "--dry-run")
		}
		cmd := exec.CommandContext(ctx, realmfs, argv...)
		cmd.Stdout, cmd.Stderr = out.w, out.ew
		var ee *exec.ExitError
		switch err := cmd.Run(); {
		case errors.As(err, &ee):
			code = max(code, ee.ExitCode())
		case err != nil:
			return 0, fmt.Errorf("running %s: %w", realmfs, err)
		}
	}
	return code, nil
}

// sessionOwners lists the owners of the journal at target (a mountpoint
// or BACKING) that are the container cid, from realmfs journal list, each
// with its incarnation where the records hold one (OWNER@START).
func sessionOwners(ctx context.Context, realmfs, target, cid string) ([]string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, realmfs, "journal", "list", target, "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("realmfs journal list %s: %w: %s", target, err, bytes.TrimSpace(errb.Bytes()))
	}
	var owners []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r struct {
			Owner string `json:"owner"`
			Start string `json:"owner_start"` // its incarnation, if any
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || audit.ContainerOf(r.Owner) != cid {
			continue
		}
		// One incarnation at a time, as undo wants it (a container's
		// owner, a cgroup, has none: its id is not given again).
		owner := r.Owner
		if r.Start != "" {
			owner += "@" + r.Start
		}
		if !slices.Contains(owners, owner) {
			owners = append(owners, owner)
		}
	}
	return owners, sc.Err()
}
