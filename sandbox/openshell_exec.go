package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// How an OpenShell exec runs, and why.
//
// The CLI exits with the remote command's exit status, and with 1 when it
// fails itself (gateway down, no such sandbox), so its status cannot tell
// "the command exited 1" from "the command never ran". And OpenShell's own
// timeout leaves the command running. So the command runs under a small
// POSIX sh wrapper (it works with busybox sh and dash) that
//
//  1. exits at once if the exec was already cancelled (a cancel file, see
//     below), so a command that reaches the sandbox late never starts;
//  2. starts the command as `setsid ARGV... &`: a background child of a
//     non-interactive shell is not a process group leader, so setsid(1)
//     calls setsid(2) in place and execs the command, whose pid ($!) is
//     therefore the id of a new session and process group holding the
//     command and everything it starts;
//  3. writes that id to <RemoteTmp>/realm-exec-<nonce>.pgid and waits for
//     the command (the wait's stderr goes to /dev/null: shells report a
//     signalled job there, "Killed", which is not the command's output);
//  4. kills what is left of the group (background children of the command:
//     an exec's process tree ends with it), removes the pgid file, and
//     prints the marker "realm-exec-<nonce>:<status>" as the last line of
//     stderr.
//
// realm strips the marker from the captured stderr; its status is the
// command's exit status. No marker means the CLI failed: REALM_NOT_ACTIVE.
//
// At the deadline a second exec (execKillScript) creates the cancel file,
// reads the pgid file and sends SIGKILL to the group; then the local CLI is
// killed; then a third exec (execCheckScript) looks for any live,
// non-zombie process of the group in /proc (killing again while it waits),
// and only when there is none is the result TOOL_TIMEOUT.
//
// Commands that leave their process group on purpose (setsid, a daemon's
// double fork into a new session) are out of reach, as they are for any
// process-group kill. `kill -KILL -PGID` is written without "--" because
// busybox's kill refuses "--" and dash's mis-reads it.
const execWrapperScript = `d=$1 n=$2
shift 2
f=$d/realm-exec-$n
m=realm-exec-$n
[ -e "$f.cancel" ] && exit 0
if ! command -v setsid >/dev/null 2>&1; then
	printf '%s:nosetsid\n' "$m" >&2
	exit 127
fi
setsid "$@" &
pg=$!
if ! echo "$pg" >"$f.pgid"; then
	kill -KILL -"$pg" "$pg" 2>/dev/null
	printf '%s:nopgid\n' "$m" >&2
	exit 127
fi
[ -e "$f.cancel" ] && kill -KILL -"$pg" "$pg" 2>/dev/null
wait "$pg" 2>/dev/null
rc=$?
kill -KILL -"$pg" 2>/dev/null
rm -f "$f.pgid"
printf '%s:%d\n' "$m" "$rc" >&2
exit "$rc"
`

// execKillScript is the second exec of a timed-out command: it marks the
// exec cancelled (so a wrapper that has not started yet never starts the
// command, and one between starting it and writing the pgid kills it
// itself), then kills the group named in the pgid file and prints it.
const execKillScript = `f=$1/realm-exec-$2
: >"$f.cancel" 2>/dev/null
pg=$(cat "$f.pgid" 2>/dev/null)
case $pg in
''|*[!0-9]*) echo realm-kill:none; exit 0 ;;
esac
kill -KILL -"$pg" "$pg" 2>/dev/null
echo "realm-kill:$pg"
`

// execCheckScript is the third exec: it confirms that no process of the
// killed group (and of a group the wrapper may have registered since) is
// alive, killing again and retrying for about five seconds. Zombies do not
// count: they are dead and wait only for their parent (or the sandbox's
// init) to reap them. Without /proc it falls back to kill -0, which counts
// zombies too.
const execCheckScript = `f=$1/realm-exec-$2
pgs="$3 $(cat "$f.pgid" 2>/dev/null)"
survivors() {
	g=$1 out=
	if [ -r /proc/self/stat ]; then
		for s in /proc/[0-9]*/stat; do
			{ read -r l <"$s"; } 2>/dev/null || continue
			r=${l##*) }
			set -- $r
			[ "$3" = "$g" ] && [ "$1" != Z ] && out="$out $g"
		done
	elif kill -0 -"$g" 2>/dev/null; then
		out=" $g"
	fi
	echo "$out"
}
i=0
while :; do
	left=
	for g in $pgs; do
		case $g in ''|*[!0-9]*) continue ;; esac
		if [ -n "$(survivors "$g")" ]; then
			left="$left $g"
			kill -KILL -"$g" 2>/dev/null
		fi
	done
	if [ -z "$left" ]; then
		rm -f "$f.pgid"
		echo realm-check:gone
		exit 0
	fi
	i=$((i + 1))
	if [ "$i" -ge 50 ]; then
		echo "realm-check:alive$left"
		exit 0
	fi
	sleep 0.1 2>/dev/null || sleep 1
done
`

// Exec runs req.Argv in the sandbox name under the wrapper described above,
// captures stdout and stderr up to CaptureLimit bytes each, and returns the
// command's exit status as a successful result. At req.Timeout (or ctx's
// deadline) it kills the command's process group inside the sandbox and
// reports TOOL_TIMEOUT once no process of it is alive. A CLI that cannot run
// or fails on its own is REALM_NOT_ACTIVE; its stderr is never the message.
func (o *OpenShell) Exec(ctx context.Context, name string, req ExecRequest) (ExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return ExecResult{}, errcode.New(errcode.SchemaInvalid, "openshell: exec needs a command")
	}
	nonce, err := newExecNonce()
	if err != nil {
		return ExecResult{}, err
	}
	tmp := o.remoteTmp()
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{
		verb:    "exec",
		name:    name,
		workdir: cmp.Or(req.Workdir, OpenShellWorkspace), // as Podman's exec: the workspace, not the sandbox user's home
		command: append([]string{"/bin/sh", "-c", execWrapperScript, "realm-exec", tmp, nonce}, req.Argv...),
	})
	if err != nil {
		return ExecResult{}, err
	}

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()

	stdout := NewBoundedBuffer(CaptureLimit)
	stderr := NewBoundedBuffer(CaptureLimit)
	mw := &markerWriter{dst: stderr, prefix: []byte("realm-exec-" + nonce + ":")}
	p, err := startCLI(argv, stdout, mw)
	if err != nil {
		return ExecResult{}, err
	}

	select {
	case werr := <-p.done:
		code, err := p.exitCode(werr)
		if err != nil {
			return ExecResult{}, err
		}
		status, ok := mw.finish()
		if !ok {
			return ExecResult{}, errcode.New(errcode.RealmNotActive,
				"openshell: sandbox exec in %s failed (CLI exit status %d) before the command reported its status", name, code)
		}
		rc, err := strconv.Atoi(status)
		if err != nil {
			return ExecResult{}, errcode.New(errcode.RealmNotActive,
				"openshell: sandbox %s cannot run commands under realm's exec wrapper (%s; it needs setsid and a writable %s)", name, status, tmp)
		}
		return ExecResult{
			ExitCode:        rc,
			Stdout:          stdout.String(),
			Stderr:          stderr.String(),
			StdoutTruncated: stdout.Truncated(),
			StderrTruncated: stderr.Truncated(),
		}, nil
	case <-runCtx.Done():
		return ExecResult{}, o.stopExec(ctx, p, name, nonce, runCtx.Err(), req.Timeout)
	}
}

// stopExec ends a command that ran past its deadline (or whose ctx was
// cancelled): kill its group in the sandbox, kill the local CLI, confirm that
// nothing of the group survived. The kill and the check run on a context
// that ctx's cancellation does not reach, each bounded by CallTimeout.
func (o *OpenShell) stopExec(ctx context.Context, p *cliProc, name, nonce string, cause error, timeout time.Duration) error {
	bg := context.WithoutCancel(ctx)
	tmp := o.remoteTmp()

	killOut, kerr := o.helperExec(bg, name, []string{"/bin/sh", "-c", execKillScript, "realm-kill", tmp, nonce}, "realm-kill:")
	p.kill()
	<-p.done
	if kerr != nil {
		return errcode.Wrap(errcode.RealmNotActive, kerr, "openshell: the command in %s ran past its deadline and could not be killed", name)
	}
	pg := killOut
	if pg == "none" {
		pg = ""
	}
	left, cerr := o.helperExec(bg, name, []string{"/bin/sh", "-c", execCheckScript, "realm-check", tmp, nonce, pg}, "realm-check:")
	if cerr != nil {
		return errcode.Wrap(errcode.RealmNotActive, cerr, "openshell: the command in %s ran past its deadline; whether its processes are gone could not be checked", name)
	}
	if left != "gone" {
		return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s ran past its deadline; process group %s survived SIGKILL",
			name, strings.TrimPrefix(left, "alive "))
	}
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("openshell: the command in %s was cancelled and its process group killed: %w", name, cause)
	}
	if timeout > 0 {
		return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s ran past its deadline of %s; its process group was killed", name, timeout)
	}
	return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s ran past its deadline; its process group was killed", name)
}

// helperExec runs one of realm's own scripts in the sandbox and returns what
// follows prefix on the last line of its stdout. No such line means the CLI
// failed.
func (o *OpenShell) helperExec(ctx context.Context, name string, command []string, prefix string) (string, error) {
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{verb: "exec", name: name, command: command})
	if err != nil {
		return "", err
	}
	out := NewBoundedBuffer(4096)
	code, err := o.call(ctx, o.CallTimeout, argv, out)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(out.String(), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if !strings.HasPrefix(s, prefix) {
		return "", errcode.New(errcode.RealmNotActive, "openshell: sandbox exec in %s failed (CLI exit status %d)", name, code)
	}
	return strings.TrimPrefix(s, prefix), nil
}

func (o *OpenShell) remoteTmp() string {
	if o.RemoteTmp == "" {
		return "/tmp"
	}
	return o.RemoteTmp
}

// newExecNonce returns 128 random bits in hex: it names the exec's files in
// the sandbox and its marker, so neither can collide with another exec's.
func newExecNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// markerHold is how many trailing bytes markerWriter keeps back: more than
// the longest marker ("realm-exec-" + 32 hex + ":" + status + "\n").
const markerHold = 128

// markerWriter passes a stream to dst but keeps its last markerHold bytes
// back until finish, which strips the wrapper's marker line from the end.
// So the marker never reaches the capture, and a capture that was full
// before the marker keeps its truncated flag honest.
type markerWriter struct {
	dst    io.Writer
	prefix []byte
	hold   []byte
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.hold = append(w.hold, p...)
	if n := len(w.hold) - markerHold; n > 0 {
		if _, err := w.dst.Write(w.hold[:n]); err != nil {
			return 0, err
		}
		w.hold = append(w.hold[:0], w.hold[n:]...)
	}
	return len(p), nil
}

// finish flushes what is held back, without the marker if the stream ends
// with one, and returns the marker's status.
func (w *markerWriter) finish() (status string, ok bool) {
	held := w.hold
	w.hold = nil
	if i := bytes.LastIndex(held, w.prefix); i >= 0 && bytes.HasSuffix(held, []byte("\n")) {
		s := held[i+len(w.prefix) : len(held)-1]
		if len(s) > 0 && bytes.IndexByte(s, '\n') < 0 {
			_, _ = w.dst.Write(held[:i])
			return string(s), true
		}
	}
	_, _ = w.dst.Write(held)
	return "", false
}
