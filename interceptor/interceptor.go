// Package interceptor is realm's OpenShell gateway interceptor: the service
// an operator registers once with the OpenShell gateway so that every
// sandbox realm creates gets that session's guarded realmfs mount at
// /workspace, and no other host path.
//
// The gateway calls it (gRPC, openshell.gateway_interceptor.v1) for
// openshell.v1.OpenShell/CreateSandbox in two phases:
//
//   - modify_operation: for a request labelled by realm (io.realm.managed,
//     io.realm.session), it returns RFC 6902 patches that add exactly one
//     podman driver mount, {"type":"bind","source":<the session's realmfs
//     mountpoint>,"target":"/workspace","read_only":false}, at
//     /spec/template/driverConfig/podman/mounts, creating the objects on
//     the way that the request lacks;
//   - validate: a realm-labelled request must carry exactly that one host
//     bind and no other host-backed mount (no other bind, no named volume,
//     nothing with an absolute source), in any driver's block; and no
//     sandbox, realm's or not, may mount a host path that is, contains or
//     lies inside realm's state dir or any session's workspace or
//     mountpoint, the realm sandbox's own mount at /workspace excepted.
//     Sources are resolved first (symlinks, "..", aliases by device and
//     inode), and a source in procfs is refused outright.
//
// The mountpoint is never taken from the request: the session id of the
// label names a record in realm's state dir, which must be an OpenShell
// session being created, and its mount must be a realmfs mount there.
//
// The package imports neither fusefs nor a runtime; it is handed the
// session lookup (Sessions) as a value.
package interceptor

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/realm-dev/realm/sandbox/label"
)

// The names the gateway uses for what realm intercepts.
const (
	OpenShellService = "openshell.v1.OpenShell"
	CreateSandbox    = "CreateSandbox"
	CreateSandboxRPC = OpenShellService + "/" + CreateSandbox
)

// Workspace is where the mount goes in the sandbox.
const Workspace = "/workspace"

// MountsPointer is the JSON pointer of the podman driver's mounts in a
// CreateSandboxRequest, as protobuf JSON names it.
const MountsPointer = "/spec/template/driverConfig/podman/mounts"

// Sessions finds the guarded mount of a realm session.
type Sessions interface {
	// Mount returns the realmfs mountpoint of session id, which is being
	// created on the OpenShell runtime, or an error saying why there is
	// none.
	Mount(id string) (string, error)
	// StateDir is realm's state dir; no sandbox may bind it, anything
	// beneath it or anything above it.
	StateDir() string
	// Workspaces returns every path a session of the state dir guards:
	// each record's workspace dir (BACKING) and its mountpoint. No sandbox
	// may bind one of them, beneath or above one, but a realm sandbox its
	// own mountpoint at /workspace.
	Workspaces() ([]string, error)
}

// Service is the interceptor.
type Service struct {
	Sessions Sessions
}

var _ Handler = (*Service)(nil)

// Describe implements Handler: one binding, CreateSandbox, both phases,
// fail closed (a sandbox realm cannot vouch for is not made).
func (s *Service) Describe(context.Context) (*Manifest, error) {
	return &Manifest{
		Name: "realm-workspace",
		Bindings: []Binding{{
			ID:            "realm-workspace-create-sandbox",
			RPC:           CreateSandboxRPC,
			Phases:        []Phase{PhaseModifyOperation, PhaseValidate},
			FailurePolicy: "fail_closed",
		}},
		FailurePolicy: "fail_closed",
	}, nil
}

// Evaluate implements Handler.
func (s *Service) Evaluate(_ context.Context, e *Evaluation) (*Result, error) {
	return s.evaluate(e), nil
}

func allow() *Result { return &Result{Allowed: true} }

// deny is a refusal the gateway shows the caller (see DenialMessage). The
// reason is made valid UTF-8: it quotes paths from the request, and a
// protobuf string that is not would fail the gateway's decode instead.
func deny(format string, args ...any) *Result {
	reason := strings.ToValidUTF8("realm: "+fmt.Sprintf(format, args...), "\uFFFD")
	return &Result{Allowed: false, StatusCode: "PERMISSION_DENIED", Reason: reason}
}

func (s *Service) evaluate(e *Evaluation) *Result {
	if e.Service != OpenShellService || e.Method != CreateSandbox {
		return allow() // not bound by realm's manifest; nothing to say
	}
	switch e.Phase {
	case PhaseModifyOperation, PhaseValidate:
	default:
		return allow() // post_commit: observation only
	}
	op := e.Operation
	if op == nil {
		return deny("the %s evaluation carries no proposed operation", e.Phase)
	}
	id, realm, err := realmSession(op)
	if err != nil {
		return deny("%v", err)
	}
	mounts, err := driverMounts(op)
	if err != nil {
		return deny("%v", err)
	}
	if !realm {
		if why := s.refuseHostPaths(mounts); why != "" {
			return deny("sandbox %q may not mount %s", str(op["name"]), why)
		}
		return allow()
	}
	mnt, err := s.Sessions.Mount(id)
	if err != nil {
		return deny("sandbox of session %s: %v", id, err)
	}
	res := allow()
	res.LogAnnotations = map[string]string{"realm_session": id}
	host := hostBacked(mounts)
	if e.Phase == PhaseModifyOperation {
		if len(host) > 0 {
			return deny("realm sandboxes take no host-backed mount but the workspace; the request mounts %s (%s)", host[0].source, host[0].kind)
		}
		if t, ok := mountTargeting(op, Workspace); ok {
			return deny("the request already mounts something (%s) at %s", t, Workspace)
		}
		res.Patches = workspacePatches(op, mnt)
		return res
	}
	// validate
	if len(host) != 1 {
		return deny("a realm sandbox must carry exactly one host-backed mount, the workspace bind at %s; it has %d%s", Workspace, len(host), listMounts(host))
	}
	b := host[0]
	if b.kind != "bind" || b.driver != "podman" || b.source != mnt || b.target != Workspace || b.readOnly {
		return deny("the one host bind of a realm sandbox must be %s read-write at %s (podman driver); it is a %s of %s at %s in the %s block (read_only %v)",
			mnt, Workspace, b.kind, b.source, b.target, b.driver, b.readOnly)
	}
	return res
}

// refuseHostPaths says why one of the mounts of a sandbox that is not
// realm's may not be made, or "": a source in procfs, or one that is,
// contains or lies inside a guarded path. (A realm sandbox has exactly one
// host-backed mount, its own mountpoint, which evaluate checks.)
func (s *Service) refuseHostPaths(mounts []mount) string {
	var g *guarded
	for _, m := range hostBacked(mounts) {
		if m.kind == "volume" && !path.IsAbs(m.source) {
			continue // a named volume: podman's, not a path (see docs/realmctl.md)
		}
		if g == nil {
			ws, err := s.Sessions.Workspaces()
			if err != nil {
				return fmt.Sprintf("%s: realm's sessions cannot be listed to vouch for it: %v", m.source, err)
			}
			if g, err = newGuarded(s.Sessions.StateDir(), ws); err != nil {
				return fmt.Sprintf("%s: realm's guarded paths cannot be resolved to vouch for it: %v", m.source, err)
			}
		}
		if why := g.check(m.source); why != "" {
			return fmt.Sprintf("%s %s at %s: %s", m.kind, m.source, m.target, why)
		}
	}
	return ""
}

// realmSession reports whether op is labelled by realm, and the session id
// its label names.
func realmSession(op map[string]any) (id string, realm bool, err error) {
	labels, _ := op["labels"].(map[string]any)
	managed, hasManaged := labels[label.Managed]
	sess, hasSession := labels[label.Session]
	if !hasManaged && !hasSession {
		return "", false, nil
	}
	if managed != "true" || !hasSession {
		return "", true, fmt.Errorf("a realm sandbox needs both labels %s=true and %s=<session id>", label.Managed, label.Session)
	}
	id = str(sess)
	if !validID(id) {
		return "", true, fmt.Errorf("label %s=%q is not a session id", label.Session, id)
	}
	if name := str(op["name"]); name != label.Name(id) {
		return "", true, fmt.Errorf("sandbox %q of session %s must be named %s", name, id, label.Name(id))
	}
	return id, true, nil
}

// validID is the shape of a realm session id (sandbox.ValidID): 12
// lower-case hex digits.
func validID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// mount is one mount of some driver's block. The docker and podman drivers
// share the mount schema (crates/openshell-driver-podman/src/container.rs,
// PodmanDriverMountConfig): type bind, volume, tmpfs or image; source,
// target, read_only (default true).
type mount struct {
	driver, kind, source, target string
	readOnly                     bool
}

// listMounts shows mounts in a reason: ": bind /a at /x, volume v at /y".
func listMounts(ms []mount) string {
	if len(ms) == 0 {
		return ""
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s %s at %s", m.kind, m.source, m.target)
	}
	return ": " + strings.Join(parts, ", ")
}

// driverBlocks returns spec.template.driverConfig's blocks, keyed by driver.
func driverBlocks(op map[string]any) map[string]any {
	spec, _ := op["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	dc, _ := tmpl["driverConfig"].(map[string]any)
	return dc
}

// driverMounts returns every mount in every driver block.
func driverMounts(op map[string]any) ([]mount, error) {
	var out []mount
	for driver, blk := range driverBlocks(op) {
		b, ok := blk.(map[string]any)
		if !ok {
			continue
		}
		mounts, ok := b["mounts"].([]any)
		if !ok {
			if b["mounts"] != nil {
				return nil, fmt.Errorf("driverConfig.%s.mounts is not a list", driver)
			}
			continue
		}
		for _, m := range mounts {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("driverConfig.%s.mounts holds a non-object", driver)
			}
			ro := true
			if v, ok := mm["read_only"].(bool); ok {
				ro = v
			}
			out = append(out, mount{driver: driver, kind: str(mm["type"]), source: str(mm["source"]),
				target: normTarget(str(mm["target"])), readOnly: ro})
		}
	}
	return out, nil
}

// hostBacked returns the mounts that may show a host path: binds; named
// volumes, which podman's local driver can back with a bind of any host
// path (the interceptor cannot see which); and any other mount whose
// source is an absolute path. tmpfs and image mounts are not.
func hostBacked(mounts []mount) []mount {
	var out []mount
	for _, m := range mounts {
		if m.kind == "bind" || m.kind == "volume" || m.kind != "tmpfs" && m.kind != "image" && path.IsAbs(m.source) {
			out = append(out, m)
		}
	}
	return out
}

// mountTargeting returns the type of a mount of any driver at target.
func mountTargeting(op map[string]any, target string) (string, bool) {
	for _, blk := range driverBlocks(op) {
		b, _ := blk.(map[string]any)
		mounts, _ := b["mounts"].([]any)
		for _, m := range mounts {
			mm, _ := m.(map[string]any)
			if normTarget(str(mm["target"])) == target {
				return str(mm["type"]), true
			}
		}
	}
	return "", false
}

// normTarget is OpenShell's normalize_mount_target: trailing slashes go.
func normTarget(t string) string {
	if t == "/" {
		return t
	}
	return strings.TrimRight(t, "/")
}

// under reports whether p is dir or beneath it, by name.
func under(p, dir string) bool {
	if dir == "" || p == "" {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || dir == "/" && path.IsAbs(p) || strings.HasPrefix(p, dir+"/")
}

// workspacePatches adds the workspace bind to op: one "add" at the deepest
// part of /spec/template/driverConfig/podman/mounts that exists, since an
// RFC 6902 add needs its parent to be there.
func workspacePatches(op map[string]any, mnt string) []Patch {
	wb := map[string]any{"type": "bind", "source": mnt, "target": Workspace, "read_only": false}
	keys := []string{"spec", "template", "driverConfig", "podman", "mounts"}
	cur := op
	for i, k := range keys {
		next, ok := cur[k]
		if !ok || next == nil {
			// Build what is missing from keys[i] down.
			var v any = []any{wb}
			for j := len(keys) - 1; j > i; j-- {
				v = map[string]any{keys[j]: v}
			}
			return []Patch{{Op: "add", Path: "/" + strings.Join(keys[:i+1], "/"), Value: v}}
		}
		if i == len(keys)-1 {
			return []Patch{{Op: "add", Path: MountsPointer + "/-", Value: wb}}
		}
		m, ok := next.(map[string]any)
		if !ok {
			// Not an object: replace it (the gateway's schema check
			// refuses the result if it was not allowed to be one).
			var v any = []any{wb}
			for j := len(keys) - 1; j > i; j-- {
				v = map[string]any{keys[j]: v}
			}
			return []Patch{{Op: "replace", Path: "/" + strings.Join(keys[:i+1], "/"), Value: v}}
		}
		cur = m
	}
	return nil
}
