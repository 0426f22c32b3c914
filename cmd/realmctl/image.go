package main

import (
	"context"
	"fmt"
	"io"

	"realm/sandbox"
)

func imageInit(ctx context.Context, g *globals, out *output, args []string) error {
	fs, help := subFlags(g, "image init", "image init [--busybox PATH]", out.w)
	busybox := fs.String("busybox", sandbox.DefaultBusybox, "the statically linked busybox to build from (Debian: busybox-static)")
	if err := parse(fs, help, g, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErr("image init takes no arguments")
	}
	conn, err := sandbox.Connect(ctx, g.podmanSocket)
	if err != nil {
		return err
	}
	id, err := sandbox.InitImage(conn, *busybox)
	if err != nil {
		return err
	}
	out.print(map[string]string{"image": sandbox.DefaultImage, "id": id}, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s\n", sandbox.DefaultImage, id)
	})
	return nil
}
