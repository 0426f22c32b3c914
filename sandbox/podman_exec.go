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
// CAP_KILL), and SIGKILLs the process tree of one exec with tree_kill (see
// treeSweepFuncs): every process carrying the token, every ppid descendant
// of one, and every process in the session of one. Each exec is its own
// session (runc makes its process a session leader), so `sleep 1000 &`
// stays in the tree after its parent is gone, and `env -u REALM_EXEC
// setsid cmd &` stays in it as a child of a marked process. It exits 0 when
// a pass finds no live member, 1 when members survive 50 passes.
//
// The container's cgroup cannot do better: every exec of a container runs
// in the container's one cgroup, beside its init and the other execs, so
// the cgroup tells which processes are the container's, not which are this
// exec's. What escapes is a process that cleared REALM_EXEC, left the
// exec's sessions and was orphaned (reparented to the container's init)
// before the killer ran; destroying the session (the container) ends it.
//
// It needs only a POSIX sh, grep and /proc: no ps, pkill or setsid in the
// image.
const killerScript = treeSweepFuncs + `
tok=$1 me=$$ sid= root=
pstat /proc/$$ || exit 1
xs=" 0 1 $sd "
tree_kill
`

// Exec implements Runtime. Output is captured into BoundedBuffers, so memory
// stays at CaptureLimit per stream however much the command prints. A
// non-zero exit is a result, not an error. At the deadline (or when ctx ends)
// the command's process tree (as killerScript finds it) is killed and the
// call reports TOOL_TIMEOUT.
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
			"the command ran past its %s deadline; "+treeKilled, req.Timeout))
	case <-ctx.Done():
		return ExecResult{}, p.killTree(id, tok, done, errcode.Wrap(errcode.ToolTimeout, ctx.Err(),
			"the command was cancelled; "+treeKilled))
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

// treeKilled is what a timeout reports once the killer found no live
// member of the tree: it says what the tree is, not more.
const treeKilled = "its process tree (every process marked " + execTokenVar + ", descended from one or in its session) was killed"

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
