package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/containers/podman/v5/pkg/api/handlers"
	"github.com/containers/podman/v5/pkg/bindings/containers"
	dockerContainer "github.com/docker/docker/api/types/container"

	"github.com/realm-dev/realm/errcode"
)

// execTokenVar marks every process of one exec through its environment, which
// children inherit. At the deadline the killer finds the tree by it.
const execTokenVar = "REALM_EXEC"

// ExecTokenVar is execTokenVar for realmctl, which refuses an --env of it.
const ExecTokenVar = execTokenVar

// killGrace bounds how long a timed-out exec may take to end once its
// process tree has been killed, and how long the killer itself may run.
const killGrace = 15 * time.Second

// killerScript runs inside the container, as the exec's own user (so it may
// read the tree's /proc/PID/environ and signal it without CAP_SYS_PTRACE or
// CAP_KILL), and SIGKILLs the whole process tree of one exec: every process
// whose environment carries the token, and every process in the session of
// any of them. Each exec is its own session (runc makes its process a
// session leader), so `sleep 1000 &` stays in the tree even after its parent
// is gone. It repeats until a pass finds no live member (zombies are dead
// and skipped) and exits 0, or exits 1 if members survive 50 passes.
//
// It needs only a POSIX sh and /proc: no ps, pkill or setsid in the image.
const killerScript = `
tok=$1; me=$$; sids=" "
round=0
while [ $round -lt 50 ]; do
	round=$((round + 1))
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$me" ] && continue
		grep -q "` + execTokenVar + `=$tok" "$d/environ" 2>/dev/null || continue
		read -r st < "$d/stat" 2>/dev/null || continue
		set -- ${st##*) }
		case "$sids" in *" $4 "*) ;; *) [ "$4" != 1 ] && [ "$4" != "$me" ] && sids="$sids$4 " ;; esac
	done
	live=0
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$me" ] && continue
		read -r st < "$d/stat" 2>/dev/null || continue
		set -- ${st##*) }
		[ "$1" = Z ] && continue
		member=0
		case "$sids" in *" $4 "*) member=1 ;; esac
		[ $member = 0 ] && grep -q "` + execTokenVar + `=$tok" "$d/environ" 2>/dev/null && member=1
		[ $member = 1 ] || continue
		live=$((live + 1))
		kill -9 "$p" 2>/dev/null
	done
	[ $live = 0 ] && exit 0
	sleep 0.1 2>/dev/null || sleep 1
done
exit 1
`

// Exec implements Runtime. Output is captured into BoundedBuffers, so memory
// stays at CaptureLimit per stream however much the command prints. A
// non-zero exit is a result, not an error. At the deadline (or when ctx ends)
// the command's whole process tree is killed and the call reports
// TOOL_TIMEOUT.
func (p *Podman) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	if len(req.Argv) == 0 {
		return ExecResult{}, errcode.New(errcode.SchemaInvalid, "exec needs a command")
	}
	workdir := req.Workdir
	if workdir == "" {
		workdir = "/workspace"
	}
	tok, err := execToken()
	if err != nil {
		return ExecResult{}, err
	}
	cfg := &handlers.ExecCreateConfig{ExecOptions: dockerContainer.ExecOptions{
		Cmd:          req.Argv,
		Env:          execEnv(req.Env, tok),
		WorkingDir:   workdir,
		AttachStdout: true,
		AttachStderr: true,
		AttachStdin:  req.Stdin != nil,
	}}
	sid, err := containers.ExecCreate(p.conn, id, cfg)
	if err != nil {
		return ExecResult{}, p.notActive(err, id)
	}

	stdout := NewBoundedBuffer(CaptureLimit)
	stderr := NewBoundedBuffer(CaptureLimit)
	var out, errw io.Writer = stdout, stderr
	yes := true
	opts := &containers.ExecStartAndAttachOptions{
		OutputStream: &out, ErrorStream: &errw,
		AttachOutput: &yes, AttachError: &yes,
	}
	if req.Stdin != nil {
		opts.InputStream = bufio.NewReader(req.Stdin)
		opts.AttachInput = &yes
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
			return ExecResult{}, p.notActive(err, id)
		}
	case <-deadline:
		return ExecResult{}, p.killTree(id, tok, done, errcode.New(errcode.ToolTimeout,
			"the command ran past its %s deadline; its whole process tree was killed", req.Timeout))
	case <-ctx.Done():
		return ExecResult{}, p.killTree(id, tok, done, errcode.Wrap(errcode.ToolTimeout, ctx.Err(),
			"the command was cancelled; its whole process tree was killed"))
	}

	info, err := containers.ExecInspect(p.conn, sid, nil)
	if err != nil {
		return ExecResult{}, p.notActive(err, id)
	}
	return ExecResult{
		ExitCode:        info.ExitCode,
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
	}, nil
}

// execEnv is the exec's environment: the caller's K=V pairs, then the
// token, last so that no --env can replace it (the killer finds the tree by
// it).
func execEnv(env []string, tok string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, execTokenVar+"=") {
			out = append(out, kv)
		}
	}
	return append(out, execTokenVar+"="+tok)
}

// killTree kills the process tree of the exec marked tok, waits for the
// attached exec to end, and returns reported (or a sharper error when the
// tree could not be proven dead).
func (p *Podman) killTree(id, tok string, done <-chan error, reported *errcode.Error) error {
	ctx, cancel := context.WithTimeout(p.conn, killGrace)
	defer cancel()
	res, err := p.execQuiet(ctx, id, []string{"/bin/sh", "-c", killerScript, "realm-kill", tok})
	if err != nil {
		return errcode.Wrap(errcode.ToolTimeout, err,
			"%s; and the process tree could not be killed: the sandbox did not run the killer", reported.Message)
	}
	if res != 0 {
		return errcode.New(errcode.ToolTimeout,
			"%s; but some of its processes survived the kill", reported.Message)
	}
	select {
	case <-done:
	case <-time.After(killGrace):
		return errcode.New(errcode.ToolTimeout,
			"%s; but its output streams did not close", reported.Message)
	}
	return reported
}

// execQuiet runs argv in the container without capturing output and
// returns its exit code.
func (p *Podman) execQuiet(ctx context.Context, id string, argv []string) (int, error) {
	sid, err := containers.ExecCreate(p.conn, id, &handlers.ExecCreateConfig{ExecOptions: dockerContainer.ExecOptions{
		Cmd: argv, WorkingDir: "/", AttachStdout: true, AttachStderr: true,
	}})
	if err != nil {
		return 0, p.notActive(err, id)
	}
	var discard io.Writer = io.Discard
	yes := true
	done := make(chan error, 1)
	go func() {
		done <- containers.ExecStartAndAttach(p.conn, sid, &containers.ExecStartAndAttachOptions{
			OutputStream: &discard, ErrorStream: &discard, AttachOutput: &yes, AttachError: &yes,
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			return 0, p.notActive(err, id)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	info, err := containers.ExecInspect(p.conn, sid, nil)
	if err != nil {
		return 0, p.notActive(err, id)
	}
	return info.ExitCode, nil
}

// notActive maps a failure to reach a container or run in it to
// REALM_NOT_ACTIVE: gone (404), not running (409), or a service that does
// not answer. The API's words stay in the cause, never in the message.
func (p *Podman) notActive(err error, id string) error {
	var e *errcode.Error
	if errors.As(err, &e) {
		return err
	}
	switch httpStatus(err) {
	case 404:
		return errcode.Wrap(errcode.RealmNotActive, err, "the container %s is gone", shortID(id))
	case 409:
		return errcode.Wrap(errcode.RealmNotActive, err, "the container %s is not running", shortID(id))
	}
	return errcode.Wrap(errcode.RealmNotActive, err, "the container %s could not be reached", shortID(id))
}

func execToken() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
