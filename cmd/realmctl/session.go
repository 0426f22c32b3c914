package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"realm/sandbox"
)

func sessionCreateCmd(fs *pflag.FlagSet) runner {
	var req sandbox.CreateRequest
	fs.StringVar(&req.Workspace, "workspace", "", "the workspace `DIR` to guard and mount at /workspace")
	fs.StringVar(&req.Policy, "policy", "", "realmfs policy `FILE` (default: built-in defaults)")
	fs.StringVar(&req.Image, "image", "", "image (default "+sandbox.DefaultImage+"; see image init)")
	fs.StringVar(&req.Name, "name", "", "a name for the session")
	fs.StringArrayVar(&req.Egress, "egress", nil, "allow egress to `HOST[:PORT]` (repeatable; port defaults to 443)")
	fs.StringVar(&req.User, "user", "", "run as `UID[:GID]` (default: the workspace directory's owner)")
	fs.StringVar(&req.Runtime, "runtime", "", "sandbox runtime: "+strings.Join(sandbox.RuntimeNames(), ", ")+" (default: openshell when its CLI is on PATH or given by --openshell, else podman)")
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return 0, sessionCreate(ctx, g, out, fs, req)
	}
}

func sessionCreate(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet, req sandbox.CreateRequest) error {
	if req.Runtime == "" {
		req.Runtime = g.defaultRuntime()
	}
	if fs.ArgsLenAtDash() < 0 && fs.NArg() > 0 || fs.ArgsLenAtDash() > 0 {
		return usageErr("unexpected argument %q: the workload goes after --", fs.Arg(0))
	}
	req.Workload = fs.Args()

	plan, err := sandbox.Validate(req)
	if err != nil {
		return err
	}
	if _, err := g.realmfsPath(); err != nil {
		return err
	}
	a, unlock, err := lockedApp(g)
	if err != nil {
		return err
	}
	defer unlock()
	if !g.noReap {
		r, err := a.reap(ctx, false)
		if err != nil {
			return err
		}
		if r.ContainersRemoved+r.RecordsDeleted+r.MountsCleaned+r.SandboxesDeleted > 0 {
			out.note("reaped dead sessions first: %d containers, %d records, %d mounts",
				r.ContainersRemoved, r.RecordsDeleted, r.MountsCleaned)
		}
	}
	rec, err := a.mgr.Create(ctx, plan)
	if err != nil {
		return err
	}
	out.print(rec, func(w io.Writer) { fmt.Fprintln(w, rec.ID) })
	return nil
}

func sessionExecCmd(fs *pflag.FlagSet) runner {
	timeout := fs.Duration("timeout", 30*time.Second, "kill the command's whole process tree after this long (0: no limit)")
	workdir := fs.String("workdir", "", "working directory inside the sandbox (default /workspace)")
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return sessionExec(ctx, g, out, fs, *timeout, *workdir)
	}
}

// sessionExec returns the exit status realmctl should end with.
func sessionExec(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet, timeout time.Duration, workdir string) (int, error) {
	dash := fs.ArgsLenAtDash()
	if dash != 1 || fs.NArg() < 2 {
		return 0, usageErr("session exec wants ID -- ARGV...")
	}
	if timeout < 0 {
		return 0, usageErr("--timeout %s: must not be negative", timeout)
	}
	a, err := newApp(g)
	if err != nil {
		return 0, err
	}
	res, err := a.mgr.Exec(ctx, fs.Arg(0), sandbox.ExecRequest{
		Argv:    fs.Args()[1:],
		Workdir: workdir,
		Timeout: timeout,
	})
	if err != nil {
		return 0, err
	}
	if out.json() {
		out.print(res, nil)
		return 0, nil
	}
	io.WriteString(out.w, res.Stdout)
	io.WriteString(out.ew, res.Stderr)
	if res.StdoutTruncated {
		out.note("stdout was truncated at %d bytes", sandbox.CaptureLimit)
	}
	if res.StderrTruncated {
		out.note("stderr was truncated at %d bytes", sandbox.CaptureLimit)
	}
	return exitStatus(res.ExitCode), nil
}

// exitStatus maps a command's exit code to one a process can exit with.
func exitStatus(code int) int {
	if code < 0 || code > 255 {
		return 255
	}
	return code
}

func sessionDestroyCmd(*pflag.FlagSet) runner {
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return 0, sessionDestroy(ctx, g, out, fs)
	}
}

func sessionDestroy(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErr("session destroy wants one session id or name")
	}
	a, unlock, err := lockedApp(g)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := a.mgr.Destroy(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	out.print(map[string]any{"id": rec.ID, "destroyed": true}, func(w io.Writer) {
		fmt.Fprintf(w, "destroyed %s\n", rec.ID)
	})
	return nil
}

func sessionListCmd(*pflag.FlagSet) runner {
	return func(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) (int, error) {
		return 0, sessionList(ctx, g, out, fs)
	}
}

func sessionList(ctx context.Context, g *globals, out *output, fs *pflag.FlagSet) error {
	if fs.NArg() != 0 {
		return usageErr("session list takes no arguments")
	}
	a, err := newApp(g)
	if err != nil {
		return err
	}
	recs, err := a.mgr.List()
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []*sandbox.Record{}
	}
	out.print(recs, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tRUNTIME\tCONTAINER\tWORKSPACE\tCREATED")
		for _, r := range recs {
			cid := "-"
			if r.ContainerID != nil {
				cid = (*r.ContainerID)[:min(12, len(*r.ContainerID))]
			}
			name := r.Name
			if name == "" {
				name = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, name, r.State, r.Runtime, cid, r.Workspace,
				r.CreatedAt.Format(time.RFC3339))
		}
		tw.Flush()
	})
	return nil
}
