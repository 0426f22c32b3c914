package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

func reapCmd(fs *pflag.FlagSet) runner {
	all := fs.Bool("all", false, "remove every session, live ones too")
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return 0, reap(ctx, g, out, fs, *all)
	}
}

func reap(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet, all bool) error {
	if fs.NArg() != 0 {
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
	})
	return nil
}
