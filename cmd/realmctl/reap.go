package main

import (
	"context"
	"fmt"
	"io"
)

func reapCmd(ctx context.Context, g *globals, out *output, args []string) error {
	fs, help := subFlags(g, "reap", "reap [--all]", out.w)
	all := fs.Bool("all", false, "remove every session, live ones too")
	if err := parse(fs, help, g, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErr("reap takes no arguments")
	}
	a, err := newApp(g)
	if err != nil {
		return err
	}
	lock, err := a.lock()
	if err != nil {
		return err
	}
	defer lock.Unlock()
	r, err := a.reap(ctx, *all)
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
