package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/sandbox"
)

func imageInitCmd(c *cli) *cobra.Command {
	var busybox string
	cmd := &cobra.Command{
		Use:   "init [--busybox PATH]",
		Short: "build " + sandbox.DefaultImage + ", the default image, from the host's busybox-static",
		Long: `image init builds ` + sandbox.DefaultImage + `, the default image, from the
host's busybox-static (no registry needed).`,
		Example: `  realmctl image init
  realmctl image init --busybox /usr/bin/busybox`,
		Args: cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			return 0, imageInit(ctx, c.g, c.out, args, busybox)
		}),
	}
	cmd.Flags().StringVar(&busybox, "busybox", sandbox.DefaultBusybox, "the statically linked busybox to build from (Debian: busybox-static)")
	return cmd
}

func imageInit(ctx context.Context, g *globals, out *output, args []string, busybox string) error {
	if len(args) != 0 {
		return usageErr("image init takes no arguments")
	}
	conn, err := sandbox.Connect(ctx, g.podman().URI)
	if err != nil {
		return err
	}
	id, err := sandbox.InitImage(conn, busybox)
	if err != nil {
		return err
	}
	out.print(map[string]string{"image": sandbox.DefaultImage, "id": id}, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s\n", sandbox.DefaultImage, id)
	})
	return nil
}
