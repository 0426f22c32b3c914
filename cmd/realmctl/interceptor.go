package main

import (
	"context"

	"github.com/spf13/pflag"
)

func interceptorCmd(fs *pflag.FlagSet) runner {
	listen := fs.String("listen", "", "where to serve the interceptor: unix:///PATH")
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		_ = listen
		return 0, usageErr("openshell-interceptor: not built yet")
	}
}
