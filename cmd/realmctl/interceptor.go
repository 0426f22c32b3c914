package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-dev/realm/interceptor"
	"github.com/realm-dev/realm/sandbox"
)

func interceptorCmd(c *cli) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "openshell-interceptor --listen unix:///PATH",
		Short: "serve the OpenShell gateway interceptor that binds each session's guarded mount",
		Long: `openshell-interceptor serves the OpenShell gateway interceptor that binds
each realm session's guarded mount at /workspace (see docs/realmctl.md).`,
		Example: `  realmctl openshell-interceptor --listen unix:///run/realm/openshell-interceptor.sock`,
		Args:    cobra.ArbitraryArgs,
		RunE: c.action(func(ctx context.Context, args []string, dash int) (int, error) {
			if len(args) != 0 {
				return 0, usageErr("openshell-interceptor takes no arguments")
			}
			return 0, serveInterceptor(ctx, c.g, c.out, listen)
		}),
	}
	cmd.Flags().StringVar(&listen, "listen", "unix:///run/realm/openshell-interceptor.sock", "where to serve the gateway: unix:///PATH (the gateway.toml grpc_endpoint)")
	return cmd
}

// serveInterceptor serves realm's OpenShell gateway interceptor on a unix
// socket until ctx ends (SIGINT, SIGTERM). The socket is made 0600: the
// gateway, running as the same user (root), is its only client; the
// gateway's bearer token is not checked, the socket's mode is the boundary.
func serveInterceptor(ctx context.Context, g *globals, out *output, listen string) error {
	path, ok := strings.CutPrefix(listen, "unix://")
	if !ok || !filepath.IsAbs(path) {
		return usageErr("--listen %q: want unix:///ABSOLUTE/PATH", listen)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return fmt.Errorf("--listen %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	old := umask(0o177)
	l, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	srv := interceptor.NewServer(&interceptor.Service{Sessions: sandbox.NewInterceptorSessions(g.stateDir)})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	out.note("serving the OpenShell gateway interceptor at unix://%s for state dir %s", path, g.stateDir)
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		<-done
		os.Remove(path)
		return nil
	case err := <-done:
		os.Remove(path)
		if err != nil {
			return fmt.Errorf("serve the interceptor: %w", err)
		}
		return nil
	}
}
