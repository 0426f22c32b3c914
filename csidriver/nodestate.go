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
	// An ephemeral volume's bytes, and the project id its workspace was
	// given where they are enforced (boundEphemeral).
	SizeBytes int64  `json:"size_bytes,omitempty"`
	ProjectID uint32 `json:"project_id,omitempty"`
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
	ps := publishState{Ephemeral: p.ephemeral, Pod: p.pod}
	if p.ephemeral {
		var err error
		if ps.SizeBytes, ps.ProjectID, err = d.boundEphemeral(p); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(ps)
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
	if err := d.unboundEphemeral(id); err != nil {
		return err
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

// An inline ephemeral volume is made at publish on the node's base dir,
// so without a bound one pod could fill the file system every other
// volume on the node (and whatever else shares it) writes to. Its bytes
// are bounded as a PersistentVolume's capacity is (quota.go): a project
// of its own with a block limit, where the file system enforces project
// quotas. The bound is the volume's size attribute, else the plugin's
// --ephemeral-size, which is also the most a size attribute may ask.
//
// Ephemeral volumes take project ids from ephemeralProjectBase up, the
// lowest no other ephemeral volume's publish state holds, under nodeMu;
// PersistentVolumes take theirs from projectIDBase up to it under ctrlMu
// (allocProject refuses past it): the two ranges are apart, so neither
// allocation needs the other's lock.
const ephemeralProjectBase = 2 << 20

// checkSize refuses a size attribute on a volume that is not an inline
// ephemeral one, and one past the plugin's bound.
func (d *Driver) checkSize(size int64, ephemeral bool) error {
	switch {
	case size == 0:
		return nil
	case !ephemeral:
		return errf(codes.InvalidArgument, "parameter size is an inline ephemeral volume's: a PersistentVolume's size is its claim's storage request")
	case d.cfg.EphemeralSize > 0 && size > d.cfg.EphemeralSize:
		return errf(codes.InvalidArgument, "parameter size=%d bytes is more than the plugin's --ephemeral-size (%d bytes)", size, d.cfg.EphemeralSize)
	}
	return nil
}

// boundEphemeral gives the ephemeral workspace of p its size (the
// attribute's, else the plugin's bound) and, where the file system
// enforces project quotas, a project with that limit: the one its
// earlier publish state recorded (a publish again after its daemon
// died), else the lowest free. It returns what the publish state keeps.
func (d *Driver) boundEphemeral(p *publishRequest) (size int64, project uint32, err error) {
	size = p.params.size
	if size == 0 {
		size = d.cfg.EphemeralSize
	}
	if !d.quota || size == 0 {
		return size, 0, nil
	}
	project = d.readPublishState(p.id).ProjectID
	if project == 0 {
		if project, err = d.freeEphemeralProject(); err != nil {
			return 0, 0, errf(codes.Internal, "allocate a project id: %v", err)
		}
	}
	if err := setProject(p.dir, project); err != nil {
		return 0, 0, errf(codes.Internal, "ephemeral volume %s: %v", p.id, err)
	}
	if err := setProjectLimit(p.dir, project, size); err != nil {
		return 0, 0, errf(codes.Internal, "ephemeral volume %s: %v", p.id, err)
	}
	return size, project, nil
}

// freeEphemeralProject is the lowest project id from
// ephemeralProjectBase that no ephemeral volume's publish state on this
// node holds. The caller holds nodeMu.
func (d *Driver) freeEphemeralProject() (uint32, error) {
	ents, err := os.ReadDir(filepath.Join(d.cfg.StateDir, "volumes"))
	if err != nil && !isNotExist(err) {
		return 0, err
	}
	var used []uint32
	for _, e := range ents {
		if ps := d.readPublishState(e.Name()); ps.Ephemeral && ps.ProjectID != 0 {
			used = append(used, ps.ProjectID)
		}
	}
	return lowestFreeFrom(ephemeralProjectBase, used), nil
}

// unboundEphemeral removes the limit of an ephemeral volume's project
// before its workspace goes, so that a later volume given the id starts
// from no limit but its own.
func (d *Driver) unboundEphemeral(id string) error {
	ps := d.readPublishState(id)
	if !d.quota || ps.ProjectID == 0 {
		return nil
	}
	if err := setProjectLimit(filepath.Join(d.cfg.BaseDir, volumesDir), ps.ProjectID, 0); err != nil {
		return errf(codes.Internal, "ephemeral volume %s: %v", id, err)
	}
	return nil
}
