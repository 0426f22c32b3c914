package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
)

// InterceptorSessions is what realm's OpenShell gateway interceptor
// (interceptor.Sessions) knows of a state dir: the mount of a session being
// created, and every path the sessions guard.
type InterceptorSessions struct {
	store    *Store
	mounts   *Mounts
	stateDir string
}

// NewInterceptorSessions returns the sessions of stateDir.
func NewInterceptorSessions(stateDir string) *InterceptorSessions {
	return &InterceptorSessions{store: NewStore(stateDir), mounts: NewMounts(stateDir, ""), stateDir: stateDir}
}

// StateDir is the state dir.
func (s *InterceptorSessions) StateDir() string { return s.stateDir }

// Mount returns the mount of session id: its record must be an OpenShell
// session being created, and its mount a live realmfs mount under the
// state dir's mounts.
func (s *InterceptorSessions) Mount(id string) (string, error) {
	rec, err := s.store.Load(id)
	if errors.Is(err, ErrNoSession) {
		return "", fmt.Errorf("no such session in %s", s.stateDir)
	}
	if err != nil {
		return "", fmt.Errorf("session record: %w", err)
	}
	if rec.Runtime != "openshell" {
		return "", fmt.Errorf("the session runs on %s, not openshell", rec.Runtime)
	}
	if rec.State != StateCreating {
		return "", fmt.Errorf("the session is %s, not being created", rec.State)
	}
	if filepath.Dir(rec.Mount) != s.mounts.Dir || !Alive(rec.Mount) {
		return "", fmt.Errorf("the session's mount %s is not a live realmfs mount of the state dir", rec.Mount)
	}
	return rec.Mount, nil
}

// Workspaces returns the workspace dir and the mountpoint of every session
// record, of any runtime and state: a Podman session's workspace is as
// much BACKING as an OpenShell one's. A record that does not parse names
// nothing (the reaper deletes it).
func (s *InterceptorSessions) Workspaces() ([]string, error) {
	recs, err := s.store.All()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		for _, p := range []string{r.Workspace, r.Mount} {
			if p != "" {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
