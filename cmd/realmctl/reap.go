package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func reapCmd(c *cli) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "reap [--all]",
		Short: "remove what dead sessions left",
		Long: `reap removes what dead sessions left: sandboxes and containers first (proven
gone by listing again), then dead realmfs mounts, then records. Live
sessions (active, mount answering, sandbox running) are kept; --all removes
every session. Only the runtimes that are installed or that a record names
are asked.

Only this state dir's sandboxes and containers are removed: those labelled
io.realm.state with its identity (a hash of its resolved path), or with no
label but a record here. Another state dir's are never touched. Ones with
no label and no record (made by an older realmctl) are left and listed;
--all removes them too.`,
		Example: `  realmctl reap
  realmctl reap --all`,
		Args: cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, reap(ctx, c.g, c.out, args, all)
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every session, live ones too, and unlabelled sandboxes and containers")
	return cmd
}

func reap(ctx context.Context, g *globals, out *output, args []string, all bool) error {
	if len(args) != 0 {
		return usageErr("reap takes no arguments")
	}
	a, unlock, err := lockedApp(g)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := a.reap(ctx, all)
	if err != nil {
		return err
	}
	out.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "removed %d containers, deleted %d records, cleaned %d mounts", r.ContainersRemoved, r.RecordsDeleted, r.MountsCleaned)
		if r.SandboxesDeleted > 0 {
			fmt.Fprintf(w, ", deleted %d sandboxes", r.SandboxesDeleted)
		}
		fmt.Fprintln(w)
		if len(r.Unlabelled) > 0 {
			fmt.Fprintf(w, "left %d without a state label (made by an older realmctl; `realmctl reap --all` removes them): %s\n",
				len(r.Unlabelled), strings.Join(r.Unlabelled, ", "))
		}
	})
	return nil
}
