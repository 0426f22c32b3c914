package reaper

import (
	"context"
	"errors"

	"github.com/containers/podman/v5/pkg/bindings/containers"

	"github.com/realm-dev/realm/sandbox/label"
)

// Libpod is Containers over the libpod REST API. Conn is a bindings
// connection context (bindings.NewConnection). It is the one part of the
// reaper that speaks to a container engine: the podman bindings are its
// import, not a runtime of package sandbox.
type Libpod struct {
	Conn context.Context
}

// List implements Containers: every container, in all states, labelled
// io.realm.managed=true, or labelled openshell.managed=true with a sandbox
// name starting "realm-", with its io.realm.state label (the reap decides
// which are its state dir's). The service filters by label; the labels are
// checked again here so that a filter the service reads differently can
// never widen the sweep.
func (l Libpod) List(ctx context.Context) ([]Container, error) {
	var out []Container
	seen := map[string]bool{}
	for _, filter := range []string{label.Managed + "=true", label.OpenShellManaged + "=true"} {
		all := true
		list, err := containers.List(l.Conn, &containers.ListOptions{
			All:     &all,
			Filters: map[string][]string{"label": {filter}},
		})
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if seen[c.ID] {
				continue
			}
			if s, ok := realmOwned(c.Labels); ok {
				seen[c.ID] = true
				name := ""
				if len(c.Names) > 0 {
					name = c.Names[0]
				}
				out = append(out, Container{ID: c.ID, Name: name, Session: s, State: c.Labels[label.State]})
			}
		}
	}
	return out, nil
}

// realmOwned decides from a container's labels whether realm owns it, and
// returns its session id. realm's Podman runtime sets label.Managed and
// label.Session; OpenShell's podman driver sets label.OpenShellManaged and
// label.OpenShellSandboxName on the sandboxes it runs, and realm names its
// sandboxes label.Name(id).
func realmOwned(labels map[string]string) (session string, ok bool) {
	if labels[label.Managed] == "true" {
		return labels[label.Session], true
	}
	if labels[label.OpenShellManaged] == "true" {
		if id, ok := label.SessionOf(labels[label.OpenShellSandboxName]); ok && id != "" {
			return id, true
		}
	}
	return "", false
}

// Remove implements Containers: force removal with no stop timeout; a
// container already gone counts as removed.
func (l Libpod) Remove(ctx context.Context, id string) error {
	force := true
	var timeout uint
	_, err := containers.Remove(l.Conn, id, &containers.RemoveOptions{Force: &force, Timeout: &timeout})
	var c interface{ Code() int }
	if err != nil && errors.As(err, &c) && c.Code() == 404 {
		return nil
	}
	return err
}
