package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/containers/podman/v5/pkg/bindings"
	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/bindings/images"
	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox/label"
)

// Podman is the Runtime that runs each sandbox as a Podman container through
// the libpod REST API (github.com/containers/podman/v5/pkg/bindings).
//
// What the container gets, and why:
//   - the guarded mount bind-mounted at /workspace, so every file access goes
//     through realmfs, and the container's cgroup is its lock owner;
//   - no network at all. Podman has no per-destination filter, so a create
//     with an egress allowlist is refused (Validate; Create refuses it too)
//     rather than given a network that reaches every host: OpenShell is the
//     runtime that enforces one;
//   - the labels io.realm.managed=true, io.realm.session=<id> and
//     io.realm.state=<state dir id> the reaper sweeps by;
//   - an init (catatonit) as PID 1 that reaps orphans, so a killed process
//     tree leaves no zombie;
//   - podman's default capabilities and no more, and no_new_privileges.
type Podman struct {
	conn context.Context // a bindings connection; carries the client
	uri  string
	// StateLabel is the label.State value of the containers it creates: the
	// identity of the state dir, so that another state dir's reap leaves
	// them alone. "" sets no label.
	StateLabel string
}

// ConnectPodman connects to the libpod API at uri (unix:///run/podman/podman.sock
// or similar; DiscoverPodman picks one). A service that does not answer is
// REALM_NOT_ACTIVE, with the cause (no socket, nothing listening, no
// permission) and the command that starts one.
func ConnectPodman(ctx context.Context, uri string) (*Podman, error) {
	conn, err := Connect(ctx, uri)
	if err != nil {
		return nil, err
	}
	return &Podman{conn: conn, uri: uri}, nil
}

// Connect returns a bindings connection context for uri, for the packages
// (the reaper, image init) that call the bindings themselves.
func Connect(ctx context.Context, uri string) (context.Context, error) {
	conn, err := bindings.NewConnection(ctx, uri)
	if err != nil {
		return nil, connectError(err, uri)
	}
	return conn, nil
}

// Conn returns the bindings connection context.
func (p *Podman) Conn() context.Context { return p.conn }

// Name implements Runtime.
func (p *Podman) Name() string { return "podman" }

// Create implements Runtime: it creates and starts the container.
func (p *Podman) Create(ctx context.Context, s Spec) (string, error) {
	if len(s.Egress) > 0 {
		return "", errcode.New(errcode.SchemaInvalid, "egress %v: the podman runtime cannot enforce an egress allowlist; use the openshell runtime", s.Egress)
	}
	image := s.Image
	if image == "" {
		image = DefaultImage
	}
	if ok, err := images.Exists(p.conn, image, nil); err != nil {
		return "", p.unreachable(err, "look up image %s", image)
	} else if !ok {
		hint := ""
		if image == DefaultImage {
			hint = "; run `realmctl image init` to build it"
		}
		return "", fmt.Errorf("image %s is not in the Podman store%s", image, hint)
	}
	g := specgen.NewSpecGenerator(image, false)
	g.Name = ContainerName(s.SessionID)
	g.Labels = map[string]string{label.Managed: "true", label.Session: s.SessionID}
	if p.StateLabel != "" {
		g.Labels[label.State] = p.StateLabel
	}
	g.Command = s.Workload
	g.User = s.User
	g.WorkDir = "/workspace"
	g.Mounts = []spec.Mount{{
		Type:        "bind",
		Source:      s.Workspace,
		Destination: "/workspace",
		Options:     []string{"rbind", "rw"},
	}}
	g.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	yes := true
	g.Init = &yes
	g.NoNewPrivileges = &yes

	resp, err := containers.CreateWithSpec(p.conn, g, nil)
	if err != nil {
		return "", p.unreachable(err, "create the container of session %s from %s", s.SessionID, image)
	}
	if err := containers.Start(p.conn, resp.ID, nil); err != nil {
		// The caller records the id and destroys; return it with the error.
		return resp.ID, p.unreachable(err, "start the container of session %s", s.SessionID)
	}
	return resp.ID, nil
}

// Destroy implements Runtime: force removal (SIGKILL); a container already
// gone counts as removed.
func (p *Podman) Destroy(ctx context.Context, id string) error {
	force := true
	var timeout uint = 0
	_, err := containers.Remove(p.conn, id, &containers.RemoveOptions{Force: &force, Timeout: &timeout})
	if err == nil || httpStatus(err) == 404 {
		return nil
	}
	return p.unreachable(err, "remove container %s", shortID(id))
}

// Running reports whether container id exists and runs. A container that is
// gone is (false, nil).
func (p *Podman) Running(ctx context.Context, id string) (bool, error) {
	data, err := containers.Inspect(p.conn, id, nil)
	if httpStatus(err) == 404 {
		return false, nil
	}
	if err != nil {
		return false, p.unreachable(err, "inspect container %s", shortID(id))
	}
	return data.State != nil && data.State.Running, nil
}

// unreachable classifies an API failure: a service that cannot be reached
// is REALM_NOT_ACTIVE; anything else keeps its cause but no code.
func (p *Podman) unreachable(err error, format string, args ...any) error {
	if isConnError(err) {
		ce := connectError(err, p.uri)
		return errcode.Wrap(errcode.RealmNotActive, err, "%s: %s", fmt.Sprintf(format, args...), ce.Message)
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// httpStatus returns the HTTP status of a libpod API error, or 0.
func httpStatus(err error) int {
	var c interface{ Code() int }
	if err != nil && errors.As(err, &c) {
		return c.Code()
	}
	return 0
}

func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// WorkspaceHint implements WorkspaceHinter.
func (p *Podman) WorkspaceHint() string {
	return "The Podman service must run on this host and bind the realmfs mount: run it as root, or as the user who mounted realmfs; " +
		"a service running as another user needs user_allow_other in /etc/fuse.conf"
}
