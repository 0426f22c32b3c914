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
//     bind and no other, in any driver's block; a request that is not
//     realm's may not bind anything under realm's state dir.
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

	"realm/sandbox/label"
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
	// StateDir is realm's state dir; non-realm sandboxes may not bind
	// anything beneath it.
	StateDir() string
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

func deny(format string, args ...any) *Result {
	return &Result{Allowed: false, StatusCode: "PERMISSION_DENIED", Reason: "realm: " + fmt.Sprintf(format, args...)}
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
	binds, err := hostBinds(op)
	if err != nil {
		return deny("%v", err)
	}
	if !realm {
		for _, b := range binds {
			if under(b.source, s.Sessions.StateDir()) {
				return deny("sandbox %q is not labelled by realm and may not bind %s, beneath realm's state dir", str(op["name"]), b.source)
			}
		}
		return allow()
	}
	mnt, err := s.Sessions.Mount(id)
	if err != nil {
		return deny("sandbox of session %s: %v", id, err)
	}
	res := allow()
	res.LogAnnotations = map[string]string{"realm_session": id}
	if e.Phase == PhaseModifyOperation {
		if len(binds) > 0 {
			return deny("realm sandboxes take no host bind but the workspace; the request binds %s", binds[0].source)
		}
		if t, ok := mountTargeting(op, Workspace); ok {
			return deny("the request already mounts something (%s) at %s", t, Workspace)
		}
		res.Patches = workspacePatches(op, mnt)
		return res
	}
	// validate
	if len(binds) != 1 {
		return deny("a realm sandbox must carry exactly one host bind, the workspace at %s; it has %d", Workspace, len(binds))
	}
	b := binds[0]
	if b.driver != "podman" || b.source != mnt || b.target != Workspace || b.readOnly {
		return deny("the one host bind of a realm sandbox must be %s read-write at %s (podman driver); it is %s at %s in the %s block (read_only %v)",
			mnt, Workspace, b.source, b.target, b.driver, b.readOnly)
	}
	return res
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

// bind is one host bind mount of some driver's block.
type bind struct {
	driver, source, target string
	readOnly               bool
}

// driverBlocks returns spec.template.driverConfig's blocks, keyed by driver.
func driverBlocks(op map[string]any) map[string]any {
	spec, _ := op["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	dc, _ := tmpl["driverConfig"].(map[string]any)
	return dc
}

// hostBinds returns every mount of type "bind" in every driver block. The
// drivers share the mount schema (type, source, target, read_only, which
// defaults to true).
func hostBinds(op map[string]any) ([]bind, error) {
	var out []bind
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
			if mm["type"] != "bind" {
				continue
			}
			ro := true
			if v, ok := mm["read_only"].(bool); ok {
				ro = v
			}
			out = append(out, bind{driver: driver, source: str(mm["source"]), target: normTarget(str(mm["target"])), readOnly: ro})
		}
	}
	return out, nil
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

func under(p, dir string) bool {
	if dir == "" || p == "" {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+"/")
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
