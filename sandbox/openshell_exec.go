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
	"sync"
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
//  1. exits at once if the exec was already cancelled (a cancel file in
//     <RemoteTmp>, see below), so a command that reaches the sandbox late
//     never starts;
//  2. forks a subshell that exports REALM_EXEC=<nonce> (the tree's mark,
//     inherited by everything the command starts), prints the start line
//     "realm-exec-<nonce>:start W P S" to stderr, where W is the wrapper's
//     pid, P its own and S the session the wrapper runs in, and execs
//     `setsid ARGV...`: a background child of a non-interactive shell is not
//     a process group leader, so setsid(1) calls setsid(2) in place and
//     execs the command, whose pid P is the id of a new session holding the
//     command and what it starts. The start line is written before the
//     command exists, so it is the first line of the wrapper's stderr and
//     the command can neither forge an earlier one nor change it: realm
//     takes the ids from its own copy of the stream (startWriter), never
//     from a file in the sandbox;
//  3. waits for the command (the wait's stderr goes to /dev/null: shells
//     report a signalled job there, "Killed", which is not the command's
//     output);
//  4. kills what is left of the tree with tree_kill (treeSweepFuncs: the
//     session P, every process marked REALM_EXEC=<nonce>, their ppid
//     descendants and sessions), and prints the marker
//     "realm-exec-<nonce>:<status>" as the last line of stderr, followed by
//     " alive" when members survived SIGKILL.
//
// realm strips both lines from the captured stderr; the marker's status is
// the command's exit status. No marker means the CLI failed:
// REALM_NOT_ACTIVE.
//
// At the deadline a second exec (execKillScript) creates the cancel file and
// runs tree_kill with the ids realm has read so far (the wrapper W as a root
// whose ppid descendants are members, once its cmdline shows the nonce; the
// session P; the mark); then the local CLI is killed, which flushes what the
// CLI had of the stream; then a third exec runs the same script with the ids
// as they are now, and only its "gone" is a confirmed kill. Without a start
// line realm still kills by the mark but reports that the kill could not be
// verified.
//
// What the sweep cannot reach is said at treeSweepFuncs: a process that left
// the session, cleared REALM_EXEC and was orphaned before the sweep. A
// command's own PID namespace (unshare --pid) would close that gap, but it
// needs CAP_SYS_ADMIN or an unprivileged user namespace, which OpenShell's
// seccomp policy does not grant the sandbox user, and --map-root-user would
// change the uid the command runs as. `kill -KILL -PGID` is written without
// "--" because busybox's kill refuses "--" and dash's mis-reads it.
const execWrapperScript = `d=$1 n=$2
shift 2
f=$d/realm-exec-$n
m=realm-exec-$n
[ -e "$f.cancel" ] && exit 0
for c in setsid grep; do
	if ! command -v "$c" >/dev/null 2>&1; then
		printf '%s:no%s\n' "$m" "$c" >&2
		exit 127
	fi
done
` + treeSweepFuncs + `
me=$$
if ! pstat /proc/$$; then
	printf '%s:noproc\n' "$m" >&2
	exit 127
fi
ws=$sd
(
	export ` + execTokenVar + `=$n
	pstat /proc/self || exit 127
	[ -e "$f.cancel" ] && exit 0
	printf '%s:start %s %s %s\n' "$m" "$me" "$id" "$ws" >&2
	exec setsid "$@"
) &
pg=$!
[ -e "$f.cancel" ] && kill -KILL -"$pg" "$pg" 2>/dev/null
wait "$pg" 2>/dev/null
rc=$?
tok=$n sid=$pg root= xs=" 0 1 $ws "
if tree_kill; then
	printf '%s:%d\n' "$m" "$rc" >&2
else
	printf '%s:%d alive\n' "$m" "$rc" >&2
fi
exit "$rc"
`

// execKillScript is the second and third exec of a timed-out command: it
// marks the exec cancelled (so a wrapper that has not started the command
// yet never starts it, and one that just did kills it itself), then runs
// tree_kill on the tree: the mark, the wrapper $3 (only while its cmdline
// still names the nonce: a pid may be reused), the command's session $4,
// never the wrapper's session $5 or its own. It prints realm-kill:gone,
// realm-kill:alive (members survived), or realm-kill:noproc.
const execKillScript = `d=$1 n=$2 root=$3 sid=$4 ws=$5
: >"$d/realm-exec-$n.cancel" 2>/dev/null
` + treeSweepFuncs + `
me=$$ tok=$n
if ! pstat /proc/$$; then
	echo realm-kill:noproc
	exit 0
fi
case $root in ''|*[!0-9]*) root= ;; esac
case $sid in ''|*[!0-9]*) sid= ;; esac
case $ws in ''|*[!0-9]*) ws= ;; esac
[ -n "$root" ] && ! grep -qs "$n" "/proc/$root/cmdline" && root=
xs=" 0 1 $sd ${ws:+$ws }"
if tree_kill; then
	echo realm-kill:gone
else
	echo realm-kill:alive
fi
`

// Exec runs req.Argv in the sandbox name under the wrapper described above,
// captures stdout and stderr up to CaptureLimit bytes each, and returns the
// command's exit status as a successful result. At req.Timeout (or ctx's
// deadline) it kills the command's process tree inside the sandbox and
// reports TOOL_TIMEOUT, saying whether the kill was confirmed. A CLI that
// cannot run or fails on its own is REALM_NOT_ACTIVE; its stderr is never
// the message.
func (o *OpenShell) Exec(ctx context.Context, name string, req ExecRequest) (ExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return ExecResult{}, errcode.New(errcode.SchemaInvalid, "openshell: exec needs a command")
	}
	nonce, err := newExecNonce()
	if err != nil {
		return ExecResult{}, err
	}
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{
		verb:    "exec",
		name:    name,
		workdir: cmp.Or(req.Workdir, OpenShellWorkspace), // as Podman's exec: the workspace, not the sandbox user's home
		command: append([]string{"/bin/sh", "-c", execWrapperScript, "realm-exec", o.remoteTmp(), nonce}, req.Argv...),
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
	sw := newStartWriter(mw, nonce)
	p, err := startCLI(argv, stdout, sw)
	if err != nil {
		return ExecResult{}, err
	}

	select {
	case werr := <-p.done:
		code, err := p.exitCode(werr)
		if err != nil {
			return ExecResult{}, err
		}
		sw.flush()
		status, ok := mw.finish()
		if !ok {
			return ExecResult{}, errcode.New(errcode.RealmNotActive,
				"openshell: sandbox exec in %s failed (CLI exit status %d) before the command reported its status", name, code)
		}
		rc, alive, err := parseExecStatus(status)
		if err != nil {
			return ExecResult{}, errcode.New(errcode.RealmNotActive,
				"openshell: sandbox %s cannot run commands under realm's exec wrapper (%s; it needs setsid, grep and /proc)", name, status)
		}
		if alive {
			return ExecResult{}, fmt.Errorf("openshell: the command in %s exited with status %d, but processes of its tree survived SIGKILL", name, rc)
		}
		return ExecResult{
			ExitCode:        rc,
			Stdout:          stdout.String(),
			Stderr:          stderr.String(),
			StdoutTruncated: stdout.Truncated(),
			StderrTruncated: stderr.Truncated(),
		}, nil
	case <-runCtx.Done():
		return ExecResult{}, o.stopExec(ctx, p, sw, name, nonce, runCtx.Err(), req.Timeout)
	}
}

// parseExecStatus reads the wrapper's marker status: "RC", or "RC alive"
// when members of the tree survived the wrapper's final kill.
func parseExecStatus(status string) (rc int, alive bool, err error) {
	s, alive := strings.CutSuffix(status, " alive")
	rc, err = strconv.Atoi(s)
	return rc, alive, err
}

// stopExec ends a command that ran past its deadline (or whose ctx was
// cancelled): kill its tree in the sandbox, kill the local CLI (which ends
// the stream, so every id the wrapper printed has been read), kill again and
// confirm that nothing of the tree survived. The kill and the check run on
// a context that ctx's cancellation does not reach, each bounded by
// CallTimeout. Only a check that ran with the wrapper's ids and found no
// member is reported as a kill.
func (o *OpenShell) stopExec(ctx context.Context, p *cliProc, sw *startWriter, name, nonce string, cause error, timeout time.Duration) error {
	bg := context.WithoutCancel(ctx)
	_, kerr := o.killTree(bg, name, nonce, sw.get())
	p.kill()
	<-p.done
	if kerr != nil {
		return errcode.Wrap(errcode.RealmNotActive, kerr, "openshell: the command in %s ran past its deadline and could not be killed", name)
	}
	ids := sw.get()
	left, cerr := o.killTree(bg, name, nonce, ids)
	if cerr != nil {
		return errcode.Wrap(errcode.RealmNotActive, cerr, "openshell: the command in %s ran past its deadline; whether its processes are gone could not be checked", name)
	}
	what := "ran past its deadline"
	if timeout > 0 {
		what = fmt.Sprintf("ran past its deadline of %s", timeout)
	}
	if errors.Is(cause, context.Canceled) {
		what = "was cancelled"
	}
	switch {
	case left == "alive":
		return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s %s; processes of its tree survived SIGKILL", name, what)
	case left != "gone":
		return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s %s; the kill could not be verified (the sandbox has no /proc)", name, what)
	case !ids.ok:
		return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s %s; every process carrying its %s mark was killed, "+
			"but the kill could not be verified: the sandbox never reported the command's process ids", name, what, execTokenVar)
	}
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("openshell: the command in %s was cancelled and %s: %w", name, treeKilled, cause)
	}
	return errcode.Wrap(errcode.ToolTimeout, cause, "openshell: the command in %s %s; %s", name, what, treeKilled)
}

// killTree runs execKillScript in the sandbox with what realm knows of the
// tree and returns its verdict: gone, alive or noproc.
func (o *OpenShell) killTree(ctx context.Context, name, nonce string, ids execIDs) (string, error) {
	return o.helperExec(ctx, name, []string{"/bin/sh", "-c", execKillScript, "realm-kill", o.remoteTmp(), nonce,
		ids.wrapper, ids.command, ids.session}, "realm-kill:")
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

// execIDs are the ids the wrapper's start line reports: the wrapper's pid,
// the command's (its session's id) and the session the wrapper runs in.
type execIDs struct {
	wrapper, command, session string
	ok                        bool
}

// startLineMax bounds a line startWriter holds while it looks for the start
// line; a longer one ends the search (the ids stay unknown).
const startLineMax = 4096

// startWriter passes the wrapper's stderr to dst but takes out the first
// line "realm-exec-<nonce>:start W P S" and keeps its ids. The wrapper
// prints that line before the command exists, so no line of the command's
// can come before it; lines before it (the CLI's own) pass through. It is
// safe for the CLI's stream copier and stopExec at once.
type startWriter struct {
	dst       io.Writer
	prefix    []byte
	mu        sync.Mutex
	searching bool
	line      []byte
	ids       execIDs
}

func newStartWriter(dst io.Writer, nonce string) *startWriter {
	return &startWriter{dst: dst, prefix: []byte("realm-exec-" + nonce + ":start "), searching: true}
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for w.searching && len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			if len(w.line) <= startLineMax {
				return n, nil
			}
			w.searching = false
			p, w.line = w.line, nil
			break
		}
		line := append(w.line, p[:i+1]...)
		w.line, p = nil, p[i+1:]
		if ids, ok := parseStartLine(line, w.prefix); ok {
			w.ids, w.searching = ids, false
			continue
		}
		w.searching = len(line) <= startLineMax
		if _, err := w.dst.Write(line); err != nil {
			return 0, err
		}
	}
	if len(p) > 0 {
		if _, err := w.dst.Write(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush passes on a partial line held while searching; the stream ended.
func (w *startWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.line) > 0 {
		_, _ = w.dst.Write(w.line)
		w.line = nil
	}
	w.searching = false
}

func (w *startWriter) get() execIDs {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids
}

// parseStartLine reads "PREFIX W P S\n": three decimal ids.
func parseStartLine(line, prefix []byte) (execIDs, bool) {
	rest, ok := bytes.CutPrefix(line, prefix)
	if !ok {
		return execIDs{}, false
	}
	f := strings.Fields(string(rest))
	if len(f) != 3 || !bytes.HasSuffix(rest, []byte("\n")) {
		return execIDs{}, false
	}
	for _, s := range f {
		if _, err := strconv.ParseUint(s, 10, 31); err != nil {
			return execIDs{}, false
		}
	}
	return execIDs{wrapper: f[0], command: f[1], session: f[2], ok: true}, true
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
