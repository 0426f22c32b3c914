// Package sandbox runs agent sessions: the session records in the state dir,
// the runtimes that create sandboxes (Podman through its API, NVIDIA
// OpenShell through its CLI), and exec with bounded capture and timeouts that
// kill the command's process tree (exec_tree.go says what that is).
//
// sandbox never imports fusefs: the guarded mount reaches it as a host path.
package sandbox

import (
	"context"
	"io"
	"time"

	"github.com/realm-dev/realm/policy"
)

// CaptureLimit is how many bytes of each of stdout and stderr an exec keeps;
// the rest is drained and dropped, and the stream's truncated flag is set.
const CaptureLimit = 262144

// Spec is everything a runtime needs to create one sandbox. It has been
// validated before it reaches a runtime.
type Spec struct {
	SessionID  string            // realm's id for the session
	Name       string            // a person's name for it, may be empty
	Image      string            // image reference; runtime default when empty
	Workspace  string            // host path of the guarded mount to bind at /workspace
	Workload   []string          // argv of the long-running workload; argv[0] is absolute
	Egress     []policy.Endpoint // validated allowlist; empty means no network
	User       string            // "UID:GID" the sandbox's processes run as
	SessionDir string            // a directory the runtime may write its own files into
}

// ExecRequest is one command to run inside a sandbox.
type ExecRequest struct {
	Argv    []string
	Workdir string        // empty: the runtime's default (/workspace)
	Timeout time.Duration // zero: no deadline beyond ctx
	// Env is K=V pairs added to the command's environment. Only runtimes
	// that say so take it (Podman); realmctl refuses it for the others.
	Env []string
	// Stdin, when set, is forwarded to the command's stdin until EOF.
	// Only Podman takes it; realmctl refuses it for the others.
	Stdin io.Reader
}

// ExecResult is a finished command. A non-zero ExitCode is a successful call.
type ExecResult struct {
	ExitCode        int    `json:"exitCode"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
}

// Runtime creates, runs commands in and removes sandboxes. Errors carry
// errcode codes: REALM_NOT_ACTIVE when the sandbox cannot be reached,
// TOOL_TIMEOUT when a command ran past its deadline (its process tree has
// been killed by then, or the message says it could not be verified). No child's message text becomes an error message.
type Runtime interface {
	// Name is the runtime's name as given to --runtime.
	Name() string
	// Create starts the sandbox and returns its id in the runtime.
	Create(ctx context.Context, spec Spec) (id string, err error)
	// Exec runs a command in the sandbox with bounded capture.
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)
	// Destroy removes the sandbox; one already gone counts as removed.
	Destroy(ctx context.Context, id string) error
}
