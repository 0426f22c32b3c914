package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"realm/sandbox"
)

func imageInitCmd(fs *pflag.FlagSet) runner {
	busybox := fs.String("busybox", sandbox.DefaultBusybox, "the statically linked busybox to build from (Debian: busybox-static)")
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return 0, imageInit(ctx, g, out, fs, *busybox)
	}
}

func imageInit(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet, busybox string) error {
	if fs.NArg() != 0 {
		return usageErr("image init takes no arguments")
	}
	conn, err := sandbox.Connect(ctx, g.podmanSocket)
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
