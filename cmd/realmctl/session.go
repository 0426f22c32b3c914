package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/sandbox"
)

func sessionCreateCmd(c *cli) *cobra.Command {
	var req sandbox.CreateRequest
	cmd := &cobra.Command{
		Use:     "create --workspace DIR [flags] [-- WORKLOAD ARGV...]",
		Aliases: []string{"new"},
		Short:   "start a session on a workspace and print its id",
		Long: `session create validates everything first (nothing happens if anything is
invalid), reaps what crashed sessions left (unless --no-reap), mounts the
workspace if it is not mounted yet, starts the sandbox, proves that its
/workspace is the guarded mount (a canary written through the mount must be
read back inside) and prints the session id. The sandbox runs as the owner
of the workspace directory unless --user is given; it has no network unless
--egress is given. The workload defaults to a long sleep; argv[0] must be
absolute.`,
		Example: `  realmctl session create --workspace ~/project --name agent-1
  realmctl session create --workspace ~/project --policy realm.yaml -- /usr/bin/agent --serve
  realmctl session create --runtime openshell --workspace ~/project --egress api.example.com`,
		Args: cobra.ArbitraryArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&req.Workspace, "workspace", "", "the workspace `DIR` to guard and mount at /workspace")
	fs.StringVar(&req.Policy, "policy", "", "realmfs policy `FILE` (default: built-in defaults)")
	fs.StringVar(&req.Image, "image", "", "image (default "+sandbox.DefaultImage+"; see image init)")
	fs.StringVar(&req.Name, "name", "", "a name for the session")
	fs.StringArrayVar(&req.Egress, "egress", nil, "allow egress to `HOST[:PORT]` (repeatable; port defaults to 443)")
	fs.StringVar(&req.User, "user", "", "run as `UID[:GID]` (default: the workspace directory's owner)")
	fs.StringVar(&req.Runtime, "runtime", "", "sandbox runtime: "+strings.Join(sandbox.RuntimeNames(), ", ")+" (default: openshell when its CLI is on PATH or given by --openshell, else podman)")
	cmd.RunE = c.action(func(ctx context.Context, args []string, dash int) (int, error) {
		return 0, c.sessionCreate(ctx, args, dash, req)
	})
	return cmd
}

func (c *cli) sessionCreate(ctx context.Context, args []string, dash int, req sandbox.CreateRequest) error {
	g, out := c.g, c.out
	if req.Runtime == "" {
		req.Runtime = g.defaultRuntime()
	}
	if dash < 0 && len(args) > 0 || dash > 0 {
		return usageErr("unexpected argument %q: the workload goes after --", args[0])
	}
	req.Workload = args

	plan, err := sandbox.Validate(req)
	if err != nil {
		return err
	}
	if _, err := g.realmfsPath(); err != nil {
		return err
	}
	a, unlock, err := lockedApp(g)
	if err != nil {
		return err
	}
	defer unlock()
	if !g.noReap {
		r, err := a.reap(ctx, false)
		if err != nil {
			return err
		}
		if r.ContainersRemoved+r.RecordsDeleted+r.MountsCleaned+r.SandboxesDeleted > 0 {
			out.note("reaped dead sessions first: %d containers, %d records, %d mounts",
				r.ContainersRemoved, r.RecordsDeleted, r.MountsCleaned)
		}
	}
	rec, err := a.mgr.Create(ctx, plan)
	if err != nil {
		return err
	}
	out.print(rec, func(w io.Writer) { fmt.Fprintln(w, rec.ID) })
	return nil
}

func sessionDestroyCmd(c *cli) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:     "destroy ID|NAME... | --all",
		Aliases: []string{"rm", "delete"},
		Short:   "remove sessions: sandbox, mount after the last session, then record",
		Long: `session destroy removes each session named (or, with --all, every session of
the state dir): the sandbox, the workspace's mount after its last session,
and only then the session's record. Like podman rm it goes on past a
session it cannot remove and fails at the end with the first error.`,
		Example: `  realmctl session destroy agent-1
  realmctl session rm 3f2a9c1b7d4e agent-2 agent-3
  realmctl session rm --all`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(-1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, c.sessionDestroy(ctx, args, all)
		}),
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "destroy every session of the state dir")
	return cmd
}

// destroyed is session destroy's result for one session.
type destroyed struct {
	ID        string `json:"id"`
	Destroyed bool   `json:"destroyed"`
}

func (c *cli) sessionDestroy(ctx context.Context, args []string, all bool) error {
	switch {
	case all && len(args) > 0:
		return usageErr("session destroy --all takes no session ids or names")
	case !all && len(args) == 0:
		return usageErr("session destroy wants session ids or names, or --all")
	}
	a, unlock, err := lockedApp(c.g)
	if err != nil {
		return err
	}
	defer unlock()
	refs := args
	if all {
		if refs, err = a.mgr.Store.List(); err != nil {
			return err
		}
	}
	var done []destroyed
	var first error
	for _, ref := range refs {
		rec, err := a.mgr.Destroy(ctx, ref)
		if err != nil {
			if first != nil { // the first is realmctl's error at the end
				c.out.note("session %s: %s", ref, errMessage(err))
			}
			first = cmp.Or(first, err)
			continue
		}
		done = append(done, destroyed{ID: rec.ID, Destroyed: true})
	}
	if first != nil && (len(done) == 0 || c.out.machine()) {
		return first // a machine reads one document: the error
	}
	c.printDestroyed(done, len(args) == 1 && !all)
	return first
}

// printDestroyed prints what session destroy removed: one object for a
// session named alone (as before several could be named), else a list.
func (c *cli) printDestroyed(done []destroyed, alone bool) {
	var v any = done
	if alone {
		v = done[0]
	} else if done == nil {
		v = []destroyed{}
	}
	c.out.print(v, func(w io.Writer) {
		for _, d := range done {
			fmt.Fprintf(w, "destroyed %s\n", d.ID)
		}
	})
}
