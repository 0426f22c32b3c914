// Package label holds the names by which realm marks what it creates: the
// labels on its Podman containers and OpenShell sandboxes, and the "realm-"
// prefix of their names. It is a leaf that imports nothing, so the runtimes
// (package sandbox), the reaper and the gateway interceptor share one
// definition without importing one another.
package label

import "strings"

// The labels realm puts on every container and sandbox it creates; the
// reaper sweeps by them and never touches a container without them.
const (
	Managed = "io.realm.managed" // "true"
	Session = "io.realm.session" // the session id
)

// The labels OpenShell's podman driver puts on the containers of the
// sandboxes it runs; a realm sandbox is one whose name is Name(id).
const (
	OpenShellManaged     = "openshell.managed"         // "true"
	OpenShellSandboxName = "openshell.ai/sandbox-name" // the sandbox's name
)

// Prefix starts the name of every container and sandbox realm creates; the
// reaper deletes no other.
const Prefix = "realm-"

// Name is the name of session id's container or sandbox.
func Name(id string) string { return Prefix + id }

// SessionOf returns the session id in a name made by Name, and whether name
// is one.
func SessionOf(name string) (id string, ok bool) {
	return strings.CutPrefix(name, Prefix)
}
