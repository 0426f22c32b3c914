package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/sandbox"
)

// listed is one session as session list prints it: the record (its fields
// at the top level, as before) and what is live now. The record's state is
// what it remembers; live.status is what is true.
type listed struct {
	*sandbox.Record
	Live sandbox.Health `json:"live"`
}

func sessionListCmd(c *cli) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list the sessions of the state dir, with their live state",
		Long: `session list prints every session of the state dir with its state as it is
now, not as its record remembers it: STATE is active only while the sandbox
runs and the realmfs mount answers; dead (with why) when either is gone
(realmctl reap cleans those up); unknown when the runtime cannot be asked.
-o wide adds the sandbox's and the mount's own states and the mountpoint;
-o json and -o yaml print the records with a "live" object. -q prints the
ids only, without asking any runtime.`,
		Example: `  realmctl session ls
  realmctl session ls -o wide
  realmctl session ls -q | xargs realmctl session rm
  realmctl -o yaml session ls`,
		Args: cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, c.sessionList(ctx, args, quiet)
		}),
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the session ids only, one a line")
	return cmd
}

func (c *cli) sessionList(ctx context.Context, args []string, quiet bool) error {
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
	if quiet {
		for _, r := range recs {
			fmt.Fprintln(c.out.w, r.ID)
		}
		return nil
	}
	rows := []listed{}
	for _, r := range recs {
		rows = append(rows, listed{Record: r, Live: a.mgr.Health(ctx, r)})
	}
	c.out.print(rows, func(w io.Writer) { c.listTable(w, rows) })
	return nil
}

// listTable is session list's table; -o wide adds SANDBOX, MOUNT and
// MOUNTPOINT.
func (c *cli) listTable(w io.Writer, rows []listed) {
	wide := c.out.wide()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tNAME\tSTATE\tRUNTIME\tCONTAINER\tWORKSPACE\tCREATED"
	if wide {
		head += "\tSANDBOX\tMOUNT\tMOUNTPOINT"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		cid := "-"
		if r.ContainerID != nil {
			cid = (*r.ContainerID)[:min(12, len(*r.ContainerID))]
		}
		state := r.Live.Status
		if state == "dead" {
			state += " (" + r.Live.Reason() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", r.ID, dash(r.Name), state, r.Runtime, cid, r.Workspace,
			r.CreatedAt.Format(time.RFC3339))
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%s", r.Live.Sandbox, r.Live.Mount, r.Mount)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// inspection is session inspect's document: the record and what is live now.
type inspection struct {
	Record *sandbox.Record `json:"record"`
	Live   sandbox.Health  `json:"live"`
}

func sessionInspectCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID|NAME",
		Short: "print a session's record and its live state",
		Long: `session inspect prints {"record":{…},"live":{"status":S,"sandbox":B,"mount":M}}:
the session's record as the state dir keeps it; the session's state as it
is now (active, dead, unknown, or the record's creating or stopping); the
sandbox's state as its runtime reports it now (running, exited, gone;
unknown with sandboxError when the runtime cannot be asked) and whether its
realmfs mount answers. It prints indented JSON, or YAML with -o yaml.`,
		Example: `  realmctl session inspect 3f2a9c1b7d4e
  realmctl session inspect agent-1 -o yaml`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeSessions(1),
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			a, rec, err := resolveOne(c.g, args, "inspect")
			if err != nil {
				return 0, err
			}
			in := inspection{Record: rec, Live: a.mgr.Health(ctx, rec)}
			if c.out.format == "yaml" {
				c.out.print(in, nil)
				return 0, nil
			}
			enc := json.NewEncoder(c.out.w)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return 0, enc.Encode(in)
		}),
	}
}
