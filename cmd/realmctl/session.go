package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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
	return &cobra.Command{
		Use:     "destroy ID|NAME",
		Aliases: []string{"rm", "delete"},
		Short:   "remove a session's sandbox, its mount after the last session, then its record",
		Long: `session destroy removes the sandbox, unmounts the workspace after its last
session, and only then deletes the session's record.`,
		Args: cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, c.sessionDestroy(ctx, args)
		}),
	}
}

func (c *cli) sessionDestroy(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("session destroy wants one session id or name")
	}
	a, unlock, err := lockedApp(c.g)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := a.mgr.Destroy(ctx, args[0])
	if err != nil {
		return err
	}
	c.out.print(map[string]any{"id": rec.ID, "destroyed": true}, func(w io.Writer) {
		fmt.Fprintf(w, "destroyed %s\n", rec.ID)
	})
	return nil
}

func sessionListCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list the sessions of the state dir",
		Args:    cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, c.sessionList(args)
		}),
	}
}

func (c *cli) sessionList(args []string) error {
	if len(args) != 0 {
		return usageErr("session list takes no arguments")
	}
	a, err := newApp(c.g)
	if err != nil {
		return err
	}
	recs, err := a.mgr.List()
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []*sandbox.Record{}
	}
	c.out.print(recs, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tRUNTIME\tCONTAINER\tWORKSPACE\tCREATED")
		for _, r := range recs {
			cid := "-"
			if r.ContainerID != nil {
				cid = (*r.ContainerID)[:min(12, len(*r.ContainerID))]
			}
			name := r.Name
			if name == "" {
				name = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, name, r.State, r.Runtime, cid, r.Workspace,
				r.CreatedAt.Format(time.RFC3339))
		}
		tw.Flush()
	})
	return nil
}
