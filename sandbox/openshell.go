package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/policy"
	"github.com/realm-dev/realm/sandbox/label"
)

// OpenShell runs sessions in NVIDIA OpenShell sandboxes by spawning the
// openshell CLI, one argv per call and never a shell string. OpenShell brings
// the isolation and the egress enforcement; realm adds what the CLI lacks:
// the policy document written before the sandbox exists, output bounded at
// CaptureLimit, and a timeout that kills the command's whole process group
// inside the sandbox (the CLI's own `sandbox exec --timeout` returns 124 and
// leaves the processes running, NVIDIA/OpenShell#3159).
//
// Every argv comes from buildOpenShellArgv, whose guard refuses the flags
// that would hand the sandbox credentials, host ports, host paths or
// templates (see openShellForbidden). The guarded workspace reaches the
// sandbox through the gateway operator's configuration, never a per-sandbox
// flag.
//
// The id Create returns, and Exec and Destroy take, is the sandbox's name,
// "realm-<session id>".
type OpenShell struct {
	// Bin is the path of the openshell CLI.
	Bin string
	// CreateTimeout bounds `sandbox create`, which waits for the sandbox to
	// be Ready (image pull included).
	CreateTimeout time.Duration
	// CallTimeout bounds every other call that is not the command of an
	// exec: get, list, delete, and the kill and check of a timed-out exec.
	CallTimeout time.Duration
	// RemoteTmp is the directory inside the sandbox where an exec keeps
	// its bookkeeping files (the process group id, the cancel mark). The
	// policy realm writes makes /tmp writable for exactly this reason.
	RemoteTmp string
	// StateLabel is the label.State value of the sandboxes it creates: the
	// identity of the state dir, so that another state dir's reap leaves
	// them alone. "" sets no label.
	StateLabel string
}

// Defaults of the OpenShell runtime's bounds.
const (
	DefaultOpenShellCreateTimeout = 2 * time.Minute
	DefaultOpenShellCallTimeout   = 30 * time.Second
)

// OpenShellPolicyFile is the name of the policy document in the session dir.
const OpenShellPolicyFile = "openshell-policy.yaml"

// OpenShellWorkspace is where the guarded mount appears inside an OpenShell
// sandbox; the policy document makes it the one read-write tree besides /tmp.
const OpenShellWorkspace = "/workspace"

// cliWaitDelay is how long a CLI call waits, once the CLI has exited or been
// killed, for its output pipes to close. A process the CLI left behind that
// holds them open (a local fake, a helper) must not hang realmctl.
const cliWaitDelay = 2 * time.Second

// maxCLIOutput bounds what realm reads from the CLI's stdout for its own
// use (JSON of get and list): a misbehaving CLI cannot grow realmctl's memory.
const maxCLIOutput = 8 << 20

var (
	_ Runtime        = (*OpenShell)(nil)
	_ SandboxSweeper = (*OpenShell)(nil)
	_ Prober         = (*OpenShell)(nil)
)

// NewOpenShell returns the runtime that drives the openshell CLI at bin,
// with the default bounds.
func NewOpenShell(bin string) *OpenShell {
	return &OpenShell{
		Bin:           bin,
		CreateTimeout: DefaultOpenShellCreateTimeout,
		CallTimeout:   DefaultOpenShellCallTimeout,
		RemoteTmp:     "/tmp",
	}
}

func init() { RegisterRuntime("openshell", openShellFactory("")) }

// UseOpenShellBinary makes --runtime openshell drive the CLI at bin (the
// --openshell flag) instead of the one named openshell on PATH.
func UseOpenShellBinary(bin string) { RegisterRuntime("openshell", openShellFactory(bin)) }

func openShellFactory(bin string) RuntimeFactory {
	return func(ctx context.Context, opts RuntimeOptions) (Runtime, error) {
		path := bin
		if path == "" {
			p, err := exec.LookPath("openshell")
			if err != nil {
				return nil, errcode.Wrap(errcode.RealmNotActive, err, "openshell CLI not found on PATH (install it or pass --openshell PATH)")
			}
			path = p
		}
		state, err := stateLabel(opts.StateDir)
		if err != nil {
			return nil, err
		}
		o := NewOpenShell(path)
		o.StateLabel = state
		return o, nil
	}
}

// Name is "openshell".
func (o *OpenShell) Name() string { return "openshell" }

// Create writes the session's OpenShell policy document, and only once it is
// on disk creates the sandbox from it, detached, with the workload as its
// main process. It waits for the sandbox to be Ready and returns its name.
//
// The real CLI refuses --output together with a trailing command (clap
// conflict in `sandbox create`), so the sandbox's id and phase are read with
// `sandbox get NAME -o json` after the create returned.
func (o *OpenShell) Create(ctx context.Context, spec Spec) (string, error) {
	if len(spec.Workload) == 0 {
		return "", errcode.New(errcode.SchemaInvalid, "openshell: the workload argv is empty")
	}
	if spec.SessionDir == "" {
		return "", errcode.New(errcode.SchemaInvalid, "openshell: no session dir for the policy document")
	}
	name := ContainerName(spec.SessionID)
	if !validSandboxName(name) {
		return "", errcode.New(errcode.SchemaInvalid, "openshell: session id %q does not make a valid sandbox name", spec.SessionID)
	}
	doc, err := policy.OpenShellDocument(OpenShellWorkspace, spec.Egress, spec.Workload[0])
	if err != nil {
		return "", err
	}
	// Build the argv before writing anything, so a refused argv leaves
	// no file behind either.
	policyPath := filepath.Join(spec.SessionDir, OpenShellPolicyFile)
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{
		verb:    "create",
		name:    name,
		session: spec.SessionID,
		state:   o.StateLabel,
		policy:  policyPath,
		image:   spec.Image,
		command: spec.Workload,
	})
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(spec.SessionDir, 0o700); err != nil {
		return "", fmt.Errorf("openshell: session dir: %w", err)
	}
	if err := writeFileAtomic(policyPath, doc); err != nil {
		return "", fmt.Errorf("openshell: write policy document: %w", err)
	}

	// Progress lines are of no use to realm; stdout and stderr are
	// dropped (never shown as an error message).
	code, err := o.call(ctx, o.CreateTimeout, argv, io.Discard)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", errcode.New(errcode.RealmNotActive, "openshell: sandbox create %s failed (CLI exit status %d)", name, code)
	}
	sb, err := o.get(ctx, name)
	if err != nil {
		return "", err
	}
	if sb.Phase != "Ready" {
		return name, errcode.New(errcode.RealmNotActive, "openshell: sandbox %s is %s after create, not Ready", name, sb.Phase)
	}
	return name, nil
}

// openShellSandbox is what realm reads of the CLI's JSON for one sandbox
// (`sandbox get -o json`, each element of `sandbox list -o json`).
type openShellSandbox struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Phase  string            `json:"phase"`
	Labels map[string]string `json:"labels"`
}

// get returns the sandbox called name. A failing CLI is REALM_NOT_ACTIVE:
// the CLI does not tell "no such sandbox" from "gateway down" by its status.
func (o *OpenShell) get(ctx context.Context, name string) (openShellSandbox, error) {
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{verb: "get", name: name})
	if err != nil {
		return openShellSandbox{}, err
	}
	out := NewBoundedBuffer(maxCLIOutput)
	code, err := o.call(ctx, o.CallTimeout, argv, out)
	if err != nil {
		return openShellSandbox{}, err
	}
	if code != 0 {
		return openShellSandbox{}, errcode.New(errcode.RealmNotActive, "openshell: sandbox get %s failed (CLI exit status %d)", name, code)
	}
	var sb openShellSandbox
	if out.Truncated() {
		return sb, errcode.New(errcode.RealmNotActive, "openshell: sandbox get %s printed more than %d bytes", name, maxCLIOutput)
	}
	if err := json.Unmarshal([]byte(out.String()), &sb); err != nil {
		return sb, errcode.Wrap(errcode.RealmNotActive, err, "openshell: sandbox get %s printed no sandbox JSON", name)
	}
	if sb.Name != name {
		return sb, errcode.New(errcode.RealmNotActive, "openshell: sandbox get %s answered for %q", name, sb.Name)
	}
	return sb, nil
}

// Running reports whether the sandbox name exists and is Ready. One that is
// gone is not running; a CLI that cannot answer is an error, so a session is
// never reaped because the gateway was briefly down.
func (o *OpenShell) Running(ctx context.Context, name string) (bool, error) {
	sbs, err := o.listRealm(ctx)
	if err != nil {
		return false, err
	}
	for _, sb := range sbs {
		if sb.Name == name {
			return sb.Phase == "Ready", nil
		}
	}
	return false, nil
}

// Destroy deletes the sandbox; one already gone counts as deleted.
func (o *OpenShell) Destroy(ctx context.Context, id string) error {
	return o.DeleteSandbox(ctx, id)
}

// DeleteSandbox deletes the realm sandbox name; one already gone counts as
// deleted. It refuses a name without the realm- prefix: realm never deletes
// a sandbox it did not create.
//
// The CLI exits 0 both when it deleted the sandbox and when there was none.
// When it fails, a list that succeeds and does not show the name proves the
// sandbox is gone; realm does not read the CLI's stderr to decide.
func (o *OpenShell) DeleteSandbox(ctx context.Context, name string) error {
	if !strings.HasPrefix(name, label.Prefix) || !validSandboxName(name) {
		return errcode.New(errcode.SchemaInvalid, "openshell: %q is not a realm sandbox name", name)
	}
	argv, err := buildOpenShellArgv(o.Bin, openShellCall{verb: "delete", name: name})
	if err != nil {
		return err
	}
	code, err := o.call(ctx, o.CallTimeout, argv, io.Discard)
	if err != nil {
		return err
	}
	if code == 0 {
		return nil
	}
	names, lerr := o.ListRealmSandboxes(ctx)
	if lerr != nil {
		return errcode.Wrap(errcode.RealmNotActive, lerr, "openshell: sandbox delete %s failed (CLI exit status %d)", name, code)
	}
	for _, n := range names {
		if n == name {
			return errcode.New(errcode.RealmNotActive, "openshell: sandbox delete %s failed (CLI exit status %d) and it still exists", name, code)
		}
	}
	return nil
}

// listPageSize is how many sandboxes one `sandbox list` asks for, and
// listMaxPages how many pages realm reads at most. The CLI's default page is
// 100; a gateway may cap the size, so paging goes on until an empty page.
const (
	listPageSize = 1000
	listMaxPages = 1000
)

// ListRealmSandboxes returns the names of the gateway's sandboxes that start
// with "realm-", for the reaper. Other sandboxes are not returned.
func (o *OpenShell) ListRealmSandboxes(ctx context.Context) ([]string, error) {
	sbs, err := o.listRealm(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sbs))
	for _, sb := range sbs {
		names = append(names, sb.Name)
	}
	return names, nil
}

// listRealm pages through `sandbox list -o json` and keeps the realm
// sandboxes.
func (o *OpenShell) listRealm(ctx context.Context) ([]openShellSandbox, error) {
	var realm []openShellSandbox
	offset := 0
	for page := 0; ; page++ {
		if page == listMaxPages {
			return nil, errcode.New(errcode.RealmNotActive, "openshell: sandbox list did not end after %d pages", listMaxPages)
		}
		argv, err := buildOpenShellArgv(o.Bin, openShellCall{verb: "list", limit: listPageSize, offset: offset})
		if err != nil {
			return nil, err
		}
		out := NewBoundedBuffer(maxCLIOutput)
		code, err := o.call(ctx, o.CallTimeout, argv, out)
		if err != nil {
			return nil, err
		}
		if code != 0 {
			return nil, errcode.New(errcode.RealmNotActive, "openshell: sandbox list failed (CLI exit status %d)", code)
		}
		if out.Truncated() {
			return nil, errcode.New(errcode.RealmNotActive, "openshell: sandbox list printed more than %d bytes", maxCLIOutput)
		}
		var sbs []openShellSandbox
		if err := json.Unmarshal([]byte(out.String()), &sbs); err != nil {
			return nil, errcode.Wrap(errcode.RealmNotActive, err, "openshell: sandbox list printed no sandbox JSON")
		}
		if len(sbs) == 0 {
			return realm, nil
		}
		for _, sb := range sbs {
			if strings.HasPrefix(sb.Name, label.Prefix) {
				realm = append(realm, sb)
			}
		}
		offset += len(sbs)
	}
}

// ListSandboxes implements SandboxSweeper: the realm sandboxes of
// ListRealmSandboxes, each with its label.State ("" when it has none).
func (o *OpenShell) ListSandboxes(ctx context.Context) ([]label.Sandbox, error) {
	sbs, err := o.listRealm(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]label.Sandbox, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, label.Sandbox{Name: sb.Name, State: sb.Labels[label.State]})
	}
	return out, nil
}

// cliProc is one running openshell CLI. It is its own process group, so
// killing it takes any helper it started with it.
type cliProc struct {
	cmd  *exec.Cmd
	done chan error
}

// startCLI spawns argv with stdin from /dev/null (the CLI would otherwise
// read realmctl's stdin to its end and send it to the command).
func startCLI(argv []string, stdout, stderr io.Writer) (*cliProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = cliWaitDelay
	if err := cmd.Start(); err != nil {
		return nil, errcode.Wrap(errcode.RealmNotActive, err, "openshell: cannot run the CLI")
	}
	p := &cliProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// kill ends the CLI and its process group.
func (p *cliProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// exitCode turns Wait's result into the CLI's exit status: a signal counts
// as 128+signal, as in a shell. An error that is not about the exit (pipes
// forced shut after the exit) is not a failure of the call.
func (p *cliProc) exitCode(werr error) (int, error) {
	st := p.cmd.ProcessState
	if st == nil {
		return -1, errcode.Wrap(errcode.RealmNotActive, werr, "openshell: lost the CLI")
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		return st.ExitCode(), errcode.Wrap(errcode.RealmNotActive, werr, "openshell: reading the CLI's output")
	}
	return st.ExitCode(), nil
}

// call runs one CLI call bounded by timeout and ctx, and returns the CLI's
// exit status. Stderr is always dropped: the CLI's words never become realm's
// error messages. Not starting, or not finishing in time (the CLI is killed),
// is REALM_NOT_ACTIVE.
func (o *OpenShell) call(ctx context.Context, timeout time.Duration, argv []string, stdout io.Writer) (int, error) {
	if timeout <= 0 {
		timeout = DefaultOpenShellCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := startCLI(argv, stdout, io.Discard)
	if err != nil {
		return -1, err
	}
	select {
	case werr := <-p.done:
		return p.exitCode(werr)
	case <-ctx.Done():
		p.kill()
		<-p.done
		return -1, errcode.Wrap(errcode.RealmNotActive, ctx.Err(), "openshell: %s %s did not finish within %s", argv[1], argv[2], timeout)
	}
}

// WorkspaceHint implements WorkspaceHinter.
func (o *OpenShell) WorkspaceHint() string {
	return "Register `realmctl openshell-interceptor` with the OpenShell gateway (gateway.toml: an [[openshell.gateway.interceptors]] entry " +
		"bound to openshell.v1.OpenShell/CreateSandbox with phases modify_operation and validate), set enable_bind_mounts = true under " +
		"[openshell.drivers.podman], add user_allow_other to /etc/fuse.conf, and restart the gateway; see docs/realmctl.md"
}
