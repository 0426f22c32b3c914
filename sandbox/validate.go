package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/policy"
)

// CreateRequest is `realmctl session create` as the command line gave it.
type CreateRequest struct {
	Workspace string   // the backing dir; must exist and be a directory
	Policy    string   // policy file; empty for the defaults
	Image     string   // empty for DefaultImage
	Name      string   // optional name for people
	Egress    []string // HOST[:PORT] entries; empty means no network
	User      string   // "UID[:GID]"; empty for the workspace dir's owner
	Runtime   string   // runtime name; empty for "podman"
	Workload  []string // argv of the long-running workload; empty for DefaultWorkload
}

// DefaultWorkload keeps a sandbox alive when no workload is given; the init
// in front of it reaps orphans.
var DefaultWorkload = []string{"/bin/sleep", "2147483647"}

// Plan is a validated CreateRequest, with paths made absolute and the
// defaults filled in. Only Validate makes one.
type Plan struct {
	req       CreateRequest
	workspace string
	policy    string
	egress    []policy.Endpoint
	user      string
}

// Workspace is the absolute, symlink-free path of the backing dir.
func (p *Plan) Workspace() string { return p.workspace }

// Runtime is the runtime's name.
func (p *Plan) Runtime() string { return p.req.Runtime }

// Validate checks everything a create depends on before anything happens:
// the policy file, the egress list, the workspace, the workload, the user,
// the name. Every failure is SCHEMA_INVALID naming the bad entry.
func Validate(req CreateRequest) (*Plan, error) {
	if req.Runtime == "" {
		req.Runtime = "podman"
	}
	if !HasRuntime(req.Runtime) {
		return nil, errcode.New(errcode.SchemaInvalid, "--runtime %q: unknown runtime (known: %s)",
			req.Runtime, strings.Join(RuntimeNames(), ", "))
	}
	if req.Image == "" && req.Runtime == "podman" {
		// realm's busybox image is built for the Podman runtime; OpenShell
		// sandboxes take the gateway's default image unless told otherwise.
		req.Image = DefaultImage
	}
	if len(req.Workload) == 0 {
		req.Workload = DefaultWorkload
	}
	if !filepath.IsAbs(req.Workload[0]) {
		return nil, errcode.New(errcode.SchemaInvalid, "workload argv[0] %q: not an absolute path", req.Workload[0])
	}
	if req.Name != "" && !validName(req.Name) {
		return nil, errcode.New(errcode.SchemaInvalid,
			"--name %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
	}
	p := &Plan{req: req}

	if req.Workspace == "" {
		return nil, errcode.New(errcode.SchemaInvalid, "--workspace is required")
	}
	ws, err := filepath.Abs(req.Workspace)
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return nil, errcode.Wrap(errcode.SchemaInvalid, err, "--workspace %s: does not exist", req.Workspace)
	}
	st, err := os.Stat(ws)
	if err != nil {
		return nil, errcode.Wrap(errcode.SchemaInvalid, err, "--workspace %s: cannot be read", req.Workspace)
	}
	if !st.IsDir() {
		return nil, errcode.New(errcode.SchemaInvalid, "--workspace %s: not a directory", req.Workspace)
	}
	p.workspace = ws

	if req.Policy != "" {
		abs, err := filepath.Abs(req.Policy)
		if err != nil {
			return nil, errcode.Wrap(errcode.SchemaInvalid, err, "--policy %s: bad path", req.Policy)
		}
		if _, err := policy.Load(abs); err != nil {
			return nil, err
		}
		p.policy = abs
	}

	if p.egress, err = policy.ParseEgress(req.Egress); err != nil {
		return nil, err
	}
	if len(p.egress) > 0 && !EnforcesEgress(req.Runtime) {
		return nil, errcode.New(errcode.SchemaInvalid,
			"--egress: the %s runtime cannot enforce an egress allowlist (a sandbox with a network there reaches every host); use --runtime openshell, which enforces it, or leave out --egress for no network at all", req.Runtime)
	}

	if req.User == "" {
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, errcode.New(errcode.SchemaInvalid, "--workspace %s: cannot tell its owner", req.Workspace)
		}
		p.user = fmt.Sprintf("%d:%d", sys.Uid, sys.Gid)
	} else if p.user, err = parseUser(req.User); err != nil {
		return nil, err
	}
	return p, nil
}

// parseUser accepts UID or UID:GID (numbers only: the image's /etc/passwd
// is not ours to trust), defaulting GID to UID.
func parseUser(s string) (string, error) {
	uid, gid, hasGID := strings.Cut(s, ":")
	if !hasGID {
		gid = uid
	}
	for _, n := range []string{uid, gid} {
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil || v == 1<<32-1 {
			return "", errcode.New(errcode.SchemaInvalid, "--user %q: want UID[:GID] as numbers", s)
		}
	}
	return uid + ":" + gid, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}
