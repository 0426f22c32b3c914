package sandbox

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/containers/podman/v5/pkg/api/handlers"
	"github.com/containers/podman/v5/pkg/bindings/containers"
	dockerContainer "github.com/docker/docker/api/types/container"

	"github.com/realm-dev/realm/errcode"
)

// ExecTerminal runs req.Argv in container id on a terminal: a TTY inside,
// realmctl's own terminal (os.Stdin, os.Stdout: the bindings attach those
// and no other) put in raw mode outside, stdin forwarded, and the TTY's
// size following the terminal's (the bindings resize the exec's TTY on
// every SIGWINCH). Nothing is captured or bounded: the output goes straight
// to the terminal, for a person. req.Stdin is ignored (the terminal is the
// input). It returns the command's exit code. At req.Timeout (or when ctx
// ends) the process tree is killed as for Exec, and the result is
// TOOL_TIMEOUT.
//
// The caller makes sure os.Stdin is a terminal: without one the bindings
// start the exec without a TTY on their side, and the raw stream would be
// read as a multiplexed one.
func (p *Podman) ExecTerminal(ctx context.Context, id string, req ExecRequest) (int, error) {
	if len(req.Argv) == 0 {
		return 0, errcode.New(errcode.SchemaInvalid, "exec needs a command")
	}
	workdir := req.Workdir
	if workdir == "" {
		workdir = "/workspace"
	}
	tok, err := execToken()
	if err != nil {
		return 0, err
	}
	env := execEnv(req.Env, tok)
	if term := os.Getenv("TERM"); term != "" {
		env = append([]string{"TERM=" + term}, env...)
	}
	sid, err := containers.ExecCreate(p.conn, id, &handlers.ExecCreateConfig{ExecOptions: dockerContainer.ExecOptions{
		Cmd:          req.Argv,
		Env:          env,
		WorkingDir:   workdir,
		Tty:          true,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	}})
	if err != nil {
		return 0, p.notActive(err, id)
	}
	var out io.Writer = os.Stdout
	yes := true
	opts := &containers.ExecStartAndAttachOptions{
		OutputStream: &out, ErrorStream: &out,
		InputStream:  bufio.NewReader(os.Stdin),
		AttachOutput: &yes, AttachError: &yes, AttachInput: &yes,
	}
	done := make(chan error, 1)
	go func() { done <- containers.ExecStartAndAttach(p.conn, sid, opts) }()

	var deadline <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case err := <-done:
		if err != nil {
			return 0, p.notActive(err, id)
		}
	case <-deadline:
		return 0, p.killTree(id, tok, done, errcode.New(errcode.ToolTimeout,
			"the command ran past its %s deadline; "+treeKilled, req.Timeout))
	case <-ctx.Done():
		return 0, p.killTree(id, tok, done, errcode.Wrap(errcode.ToolTimeout, ctx.Err(),
			"the command was cancelled; "+treeKilled))
	}
	info, err := containers.ExecInspect(p.conn, sid, nil)
	if err != nil {
		return 0, p.notActive(err, id)
	}
	return info.ExitCode, nil
}

// Logs writes the container's output (its workload's stdout and stderr, as
// podman logs shows it) to stdout and stderr; with follow it goes on until
// the container stops or ctx ends. tail < 0 is everything; 0 is none of
// what was written before (with follow, only what comes from now on), as
// podman logs --tail 0 and kubectl logs --tail 0 mean: the libpod API
// answers a tail of 0 with the whole log, so 0 is asked as "since now".
func (p *Podman) Logs(ctx context.Context, id string, follow bool, tail int, stdout, stderr io.Writer) error {
	if tail == 0 && !follow {
		return nil
	}
	outCh := make(chan string, 64)
	errCh := make(chan string, 64)
	yes := true
	opts := &containers.LogOptions{Stdout: &yes, Stderr: &yes, Follow: &follow}
	switch {
	case tail == 0:
		since := time.Now().Format(time.RFC3339Nano)
		opts.Since = &since
	case tail > 0:
		t := strconv.Itoa(tail)
		opts.Tail = &t
	}
	done := make(chan error, 1)
	cctx, cancel := context.WithCancel(p.conn)
	defer cancel()
	go func() {
		done <- containers.Logs(cctx, id, opts, outCh, errCh)
	}()
	for {
		select {
		case l := <-outCh:
			io.WriteString(stdout, l)
		case l := <-errCh:
			io.WriteString(stderr, l)
		case err := <-done:
			for drained := false; !drained; {
				select {
				case l := <-outCh:
					io.WriteString(stdout, l)
				case l := <-errCh:
					io.WriteString(stderr, l)
				default:
					drained = true
				}
			}
			if err != nil {
				return p.notActive(err, id)
			}
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// State is the container's live state as the service reports it
// ("running", "exited", …), or "gone".
func (p *Podman) State(ctx context.Context, id string) (string, error) {
	data, err := containers.Inspect(p.conn, id, nil)
	if httpStatus(err) == 404 {
		return "gone", nil
	}
	if err != nil {
		return "", p.unreachable(err, "inspect container %s", shortID(id))
	}
	if data.State == nil {
		return "unknown", nil
	}
	return data.State.Status, nil
}
