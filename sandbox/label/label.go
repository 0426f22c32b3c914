// Package label holds the names by which realm marks what it creates: the
// labels on its Podman containers and OpenShell sandboxes, and the "realm-"
// prefix of their names, and the identity of a state dir (StateID). It is
// a leaf that imports only the standard library, so the runtimes (package
// sandbox), the reaper and the gateway interceptor share one definition
// without importing one another.
package label

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// The labels realm puts on every container and sandbox it creates; the
// reaper sweeps by them and never touches a container without them.
const (
	Managed = "io.realm.managed" // "true"
	Session = "io.realm.session" // the session id
	// State is the identity of the state dir whose realmctl made the
	// container or sandbox (StateID). The reaper removes only what carries
	// its own state dir's identity: several state dirs (root's, a user's,
	// REALM_STATE_DIR=/tmp/realm) share one Podman service or OpenShell
	// gateway, and each tells only its own sessions alive or dead.
	State = "io.realm.state"
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

// stateIDLen is the number of hex digits of a StateID: 64 bits of SHA-256.
const stateIDLen = 16

// StateID is the identity of the state dir dir, the value of the State
// label: the first 16 hex digits of the SHA-256 of its absolute path with
// every symlink resolved, so every spelling of one dir (relative, through a
// symlink) gives one id. A dir that does not exist yet is resolved as far
// as it exists, so its id does not change once it is made.
func StateID(dir string) (string, error) {
	p, err := resolve(dir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:])[:stateIDLen], nil
}

// ValidStateID reports whether s looks like a StateID.
func ValidStateID(s string) bool {
	if len(s) != stateIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// resolve is dir made absolute, its longest existing prefix with its
// symlinks resolved and the rest appended.
func resolve(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	rest := ""
	for p := abs; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// Sandbox is a runtime's sandbox as the reaper sees it: its name, and its
// State label ("" when it has none: made by a realmctl before the label).
type Sandbox struct {
	Name  string
	State string
}
