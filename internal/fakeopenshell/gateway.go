package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/realm-dev/realm/interceptor"
)

// createRequest is the CreateSandboxRequest, as protobuf JSON, that the
// real CLI sends for a create (crates/openshell-cli/src/run.rs,
// sandbox_create): the name, the labels, the workspace, and a spec with the
// policy, the command and a template only when --from or
// --driver-config-json asks for one. Empty fields are left out, as
// protobuf JSON does. The policy is not converted; its version stands for it.
func createRequest(name string, labels map[string]string, f *parsed) (map[string]any, error) {
	spec := map[string]any{"policy": map[string]any{"version": 1.0}}
	if len(f.command) > 0 {
		cmd := make([]any, len(f.command))
		for i, c := range f.command {
			cmd[i] = c
		}
		spec["command"] = cmd
	}
	tmpl := map[string]any{}
	if img := f.values["--from"]; img != "" {
		tmpl["image"] = img
	}
	if dc := f.values["--driver-config-json"]; dc != "" {
		var v map[string]any
		if err := json.Unmarshal([]byte(dc), &v); err != nil {
			return nil, fmt.Errorf("invalid --driver-config-json: %w", err)
		}
		tmpl["driverConfig"] = v
	}
	if len(tmpl) > 0 {
		spec["template"] = tmpl
	}
	req := map[string]any{"name": name, "spec": spec, "workspace": "default"}
	if len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		req["labels"] = l
	}
	return req, nil
}

// gatewayIntercept runs the configured interceptor over req as the gateway
// does: Describe (at gateway start), modify_operation, the patches applied
// all or nothing, validate. Everything fails closed.
func gatewayIntercept(req map[string]any) (map[string]any, error) {
	sock := os.Getenv("FAKE_OPENSHELL_INTERCEPTOR")
	if sock == "" {
		return req, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := interceptor.Dial(sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m, err := c.Describe(ctx)
	if err != nil {
		// The real gateway does not start without it; the fake, started
		// per call, fails the create instead.
		return nil, fmt.Errorf("gateway interceptor unavailable: %w", err)
	}
	bound := map[interceptor.Phase]bool{}
	for _, b := range m.Bindings {
		if b.RPC == interceptor.CreateSandboxRPC {
			for _, p := range b.Phases {
				bound[p] = true
			}
		}
	}
	for _, phase := range []interceptor.Phase{interceptor.PhaseModifyOperation, interceptor.PhaseValidate} {
		if !bound[phase] {
			continue
		}
		res, err := c.Evaluate(ctx, &interceptor.Evaluation{
			InterceptorName: "realm", BindingID: "binding",
			Service: interceptor.OpenShellService, Method: interceptor.CreateSandbox,
			Principal: map[string]string{"kind": "user"},
			Phase:     phase, Operation: req,
		})
		if err != nil {
			return nil, failedClosed(err.Error())
		}
		if !res.Allowed {
			return nil, errors.New(interceptor.DenialMessage(res))
		}
		if len(res.Patches) > 0 {
			if phase != interceptor.PhaseModifyOperation {
				return nil, failedClosed("patches are invalid during validate")
			}
			patched, err := interceptor.ApplyPatches(req, res.Patches)
			if err != nil {
				return nil, failedClosed("invalid JSON patch: " + err.Error())
			}
			p, ok := patched.(map[string]any)
			if !ok {
				return nil, failedClosed("patched operation is not an object")
			}
			req = p
		}
	}
	return req, nil
}

// failedClosed is the status the CLI prints when a fail_closed interceptor
// failed (runtime.rs, apply_failure_policy: Status::permission_denied).
func failedClosed(err string) error {
	return errors.New(interceptor.StatusMessage("PERMISSION_DENIED", "gateway interceptor 'realm' failed closed: "+err))
}

// podmanDriverWorkspace is what the podman driver makes of
// template.driverConfig.podman.mounts, as far as /workspace goes: a bind
// needs enable_bind_mounts (the driver's own message otherwise), an
// absolute source and no duplicate target. It returns the host dir the
// sandbox sees at /workspace.
func podmanDriverWorkspace(req map[string]any, stateDir string) (string, error) {
	spec, _ := req["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	dc, _ := tmpl["driverConfig"].(map[string]any)
	podman, _ := dc["podman"].(map[string]any)
	mounts, _ := podman["mounts"].([]any)
	ws := ""
	var targets []string
	for _, m := range mounts {
		mm, ok := m.(map[string]any)
		if !ok {
			return "", errors.New("invalid podman driver_config: mount is not an object")
		}
		target := strings.TrimRight(fmt.Sprint(mm["target"]), "/")
		if slices.Contains(targets, target) {
			return "", fmt.Errorf("duplicate podman driver_config mount target '%s'", target)
		}
		targets = append(targets, target)
		if mm["type"] != "bind" {
			continue
		}
		if os.Getenv("FAKE_OPENSHELL_ENABLE_BIND_MOUNTS") != "1" {
			return "", errors.New("podman bind mounts require enable_bind_mounts = true in [openshell.drivers.podman]")
		}
		src, _ := mm["source"].(string)
		if !filepath.IsAbs(src) {
			return "", errors.New("bind source must be an absolute host path")
		}
		if target == "/workspace" {
			ws = src
		}
	}
	if ws != "" {
		return ws, nil
	}
	if d := os.Getenv("FAKE_OPENSHELL_WORKSPACE"); d != "" {
		return d, nil
	}
	empty := filepath.Join(stateDir, ".empty-workspace")
	return empty, os.MkdirAll(empty, 0o755)
}

// inSandbox maps a word of a command from the sandbox's view to this
// host's: /workspace (alone or as a path prefix) becomes ws.
func inSandbox(word, ws string) string {
	if ws == "" {
		return word
	}
	var b strings.Builder
	for {
		i := strings.Index(word, "/workspace")
		if i < 0 {
			b.WriteString(word)
			return b.String()
		}
		end := i + len("/workspace")
		prefixOK := i == 0 || !isPathChar(word[i-1])
		suffixOK := end == len(word) || word[end] == '/' || !isPathChar(word[end])
		b.WriteString(word[:i])
		if prefixOK && suffixOK {
			b.WriteString(ws)
		} else {
			b.WriteString("/workspace")
		}
		word = word[end:]
	}
}

func isPathChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func labelsOf(sb *sandbox) map[string]string {
	if sb.Labels == nil {
		return map[string]string{}
	}
	return sb.Labels
}
