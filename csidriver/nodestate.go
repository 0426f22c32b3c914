package csidriver

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/grpc/codes"
)

// The node's state of a volume, StateDir/volumes/<id>/: the policy file
// realmfs enforces (written from the volume's parameters: realmfs reads a
// file, and one the workspace's processes cannot reach), its audit log and
// daemon log, and publish.json. Outside the base dir, as realmfs requires.
const (
	policyFile  = "policy.yaml"
	auditFile   = "audit.log"
	logFile     = "realmfs.log"
	publishFile = "publish.json"
	goneFile    = "gone" // an ephemeral volume's, once dropped: when
	// realmStateDir holds an ephemeral volume's realmfs --state-dir (its
	// made store), which goes with the volume's state.
	realmStateDir = "realmfs"
)

// keptGone is how many dropped ephemeral volumes' logs (audit.log,
// realmfs.log) a node keeps, the newest: a tenant churning pods with
// inline volumes must not fill the node's state file system.
const keptGone = 32

// publishState is publish.json: what NodeUnpublishVolume, which is told
// only the id and the target, needs to know of the publish.
type publishState struct {
	Ephemeral bool    `json:"ephemeral"`
	Pod       podInfo `json:"pod"` // whose publish started the daemon: its audit lines are tagged so
}

// readPublishState returns the publish state of id; the zero state when
// there is none.
func (d *Driver) readPublishState(id string) publishState {
	var ps publishState
	if data, err := os.ReadFile(filepath.Join(d.stateDir(id), publishFile)); err == nil {
		_ = json.Unmarshal(data, &ps)
	}
	return ps
}

func (d *Driver) auditPath(id string) string { return filepath.Join(d.stateDir(id), auditFile) }

// auditSize is the size of an audit log, 0 if there is none yet.
func auditSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func (d *Driver) stateDir(id string) string {
	return filepath.Join(d.cfg.StateDir, "volumes", id)
}

// prepareWorkspace makes sure the workspace is there (made now for an
// ephemeral volume) and writes the node's state of the volume.
func (d *Driver) prepareWorkspace(p *publishRequest) error {
	if p.ephemeral {
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return errf(codes.Internal, "make the ephemeral workspace %s: %v", p.dir, err)
		}
		if err := os.Chmod(p.dir, 0o777); err != nil {
			return errf(codes.Internal, "chmod %s: %v", p.dir, err)
		}
	} else if _, err := os.Stat(p.dir); isNotExist(err) {
		return errf(codes.NotFound, "volume %s does not exist", p.id)
	} else if err != nil {
		return errf(codes.Internal, "%v", err)
	}
	st := d.stateDir(p.id)
	if err := os.MkdirAll(st, 0o700); err != nil {
		return errf(codes.Internal, "make %s: %v", st, err)
	}
	data, _ := json.Marshal(publishState{Ephemeral: p.ephemeral, Pod: p.pod})
	if err := writeFileAtomic(filepath.Join(st, publishFile), data); err != nil {
		return errf(codes.Internal, "record the publish of %s: %v", p.id, err)
	}
	if p.params.policy != "" {
		if err := writeFileAtomic(filepath.Join(st, policyFile), []byte(p.params.policy)); err != nil {
			return errf(codes.Internal, "write the policy of %s: %v", p.id, err)
		}
	}
	return nil
}

// realmfsArgs is the realmfs command line of a publish.
func (d *Driver) realmfsArgs(p *publishRequest) ([]string, error) {
	st := d.stateDir(p.id)
	args := []string{
		"-o", p.params.options(p.readOnly, p.mountFlags),
		"--audit-log", d.auditPath(p.id),
		"--log", filepath.Join(st, logFile),
		"--state-dir", filepath.Join(d.cfg.StateDir, "realmfs"),
	}
	if p.ephemeral { // its made store goes with its state (dropEphemeral)
		args[len(args)-1] = filepath.Join(st, realmStateDir)
	}
	switch {
	case p.params.policyName != "":
		args = append(args, "--policy", d.policyPath(p.params.policyName))
	case p.params.policy != "":
		args = append(args, "--policy", filepath.Join(st, policyFile))
	}
	return append(args, p.dir, p.target), nil
}

// dropEphemeral removes an ephemeral volume's workspace and its publish
// state once no mount of it is left.
func (d *Driver) dropEphemeral(id string) error {
	if !validID.MatchString(id) {
		return nil
	}
	if !d.readPublishState(id).Ephemeral {
		return nil // not published here by this plugin, or not ephemeral
	}
	if rest, err := d.volumeMounts(id); err != nil || len(rest) > 0 {
		return nil
	}
	if err := os.RemoveAll(d.volumeDir(id)); err != nil {
		return errf(codes.Internal, "remove the ephemeral workspace %s: %v", d.volumeDir(id), err)
	}
	// The audit log and the daemon's log stay for people to read, those
	// of the newest keptGone volumes dropped.
	st := d.stateDir(id)
	for _, f := range []string{publishFile, policyFile, realmStateDir} {
		if err := os.RemoveAll(filepath.Join(st, f)); err != nil {
			return errf(codes.Internal, "%v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(st, goneFile), nil, 0o600); err != nil {
		return errf(codes.Internal, "%v", err)
	}
	d.pruneGone()
	return nil
}

// pruneGone removes the state of the dropped ephemeral volumes but the
// newest keptGone (by when they were dropped).
func (d *Driver) pruneGone() {
	dirs, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, "volumes", "*", goneFile))
	if len(dirs) <= keptGone {
		return
	}
	when := map[string]int64{}
	for _, g := range dirs {
		if st, err := os.Stat(g); err == nil {
			when[g] = st.ModTime().UnixNano()
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(when[b], when[a]) })
	for _, g := range dirs[keptGone:] {
		if err := os.RemoveAll(filepath.Dir(g)); err != nil {
			d.cfg.Log.Warn("removing a dropped ephemeral volume's logs", "dir", filepath.Dir(g), "err", err)
		}
	}
}
