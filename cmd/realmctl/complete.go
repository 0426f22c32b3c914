package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/sandbox"
)

// completeSessions completes session ids and names from the state dir (the
// one --state-dir names on the line being completed, or the default) for
// the first max arguments (max < 0: every argument). It reads the records
// only: completion never asks a runtime.
func (c *cli) completeSessions(max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// (cobra's completion parses the line with a "--" appended, so
		// ArgsLenAtDash cannot tell an argv after "--" here; max does.)
		if max >= 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		recs, err := sandbox.NewStore(c.g.stateDir).All()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, r := range recs {
			for _, ref := range []string{r.ID, r.Name} {
				if ref != "" && strings.HasPrefix(ref, toComplete) {
					out = append(out, cobra.CompletionWithDesc(ref, describe(r)))
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// describe is a session's description beside its completion.
func describe(r *sandbox.Record) string {
	d := string(r.State) + " on " + r.Workspace
	if r.Name != "" {
		d = r.Name + ", " + d
	}
	return d
}
