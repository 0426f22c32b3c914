package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"time"

	"github.com/realm-dev/realm/sandbox/label"
)

// State is where a session is in its life. A record in StateCreating or
// StateStopping that nobody is working on (the state dir's lock is free) was
// left by a crash; the reaper finishes it.
type State string

const (
	StateCreating State = "creating" // written before any side effect of create
	StateActive   State = "active"   // the sandbox runs and the mount is up
	StateStopping State = "stopping" // destroy has begun; the record goes last
)

// Record is one session as the state dir remembers it, one JSON file per
// session. ContainerID is null until the runtime has returned one, so a
// record of a crash during create says so.
type Record struct {
	ID          string    `json:"id"`
	Name        string    `json:"name,omitempty"`
	State       State     `json:"state"`
	Runtime     string    `json:"runtime"`
	ContainerID *string   `json:"containerId"`
	Workspace   string    `json:"workspace"`
	Mount       string    `json:"mount"`
	Policy      string    `json:"policy,omitempty"`
	Image       string    `json:"image"`
	User        string    `json:"user"`
	Workload    []string  `json:"workload"`
	Egress      []string  `json:"egress,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// idPattern is the shape of a session id: lower-case hex, so that it is safe
// as a file name, a container name suffix and an OpenShell sandbox name.
var idPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

// ValidID reports whether s has the shape of a session id.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// NewID returns a fresh random session id.
func NewID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// ContainerName is the name a runtime gives the sandbox of session id
// (label.Name); the reaper matches the same prefix.
func ContainerName(id string) string { return label.Name(id) }
