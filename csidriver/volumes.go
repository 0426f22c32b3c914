package csidriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/realm-dev/realm/policy"
)

// volumesDir holds the workspaces under the base dir: volumes/<id>/ is
// the workspace, volumes/<id>.json its record.
const volumesDir = "volumes"

// validID is a volume id the plugin accepts: the id is the volume's name
// (CSI names are at most 128 characters), used as one path element beside
// the volume's record (<id>.json) and claim (<id>.writer), so it holds no
// separator and no dot: no id's directory is another's record.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// The volume parameters (a StorageClass's parameters, an inline volume's
// volumeAttributes) the plugin knows; any other is refused, so that a
// misspelt one is not silently ignored. Keys under the Kubernetes prefix
// (pod info, the ephemeral marker) are the CO's and are passed over.
const (
	paramPolicy     = "policy"     // inline YAML, checked by policy.Parse
	paramPolicyName = "policyName" // a policy file the plugin holds: PolicyDir/<name>.yaml
	paramLockOwner  = "lockowner"  // realmfs -o lockowner=
	paramDurability = "durability" // realmfs -o durability=
	paramSize       = "size"       // an inline ephemeral volume's bytes (boundEphemeral)
	k8sPrefix       = "csi.storage.k8s.io/"
	ephemeralKey    = k8sPrefix + "ephemeral"
)

// record is volumes/<id>.json: what CreateVolume was asked, so that a
// second CreateVolume of the name can be told apart from a conflicting one
// and ListVolumes can report the capacity; and the project id its
// directory was given where the capacity is enforced (quota.go), kept
// here so that it survives a restart and no other volume is given it.
type record struct {
	Name          string            `json:"name"`
	CapacityBytes int64             `json:"capacity_bytes"`
	Parameters    map[string]string `json:"parameters,omitempty"`
	Created       time.Time         `json:"created"`
	ProjectID     uint32            `json:"project_id,omitempty"`
}

func (d *Driver) volumeDir(id string) string {
	return filepath.Join(d.cfg.BaseDir, volumesDir, id)
}

func (d *Driver) recordPath(id string) string { return d.volumeDir(id) + ".json" }

// readRecord returns the record of id, or fs.ErrNotExist.
func (d *Driver) readRecord(id string) (*record, error) {
	if !validID.MatchString(id) {
		return nil, fs.ErrNotExist
	}
	data, err := os.ReadFile(d.recordPath(id))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("volume record %s: %w", d.recordPath(id), err)
	}
	return &r, nil
}

// writeRecord writes the record by rename, so a crash leaves the old
// record or the new one, never half of one.
func (d *Driver) writeRecord(r *record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(d.recordPath(r.Name), append(data, '\n'))
}

// listRecords returns the ids of the recorded volumes, sorted.
func (d *Driver) listRecords() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.cfg.BaseDir, volumesDir))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && validID.MatchString(id) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// volumeParams are the checked parameters of a volume.
type volumeParams struct {
	policy     string // inline policy YAML; "" is the built-in policy
	policyName string // or the name of a policy file of the plugin's policy dir
	lockOwner  string
	durability string
	size       int64 // bytes; 0 when not given
}

// parseParams checks a volume's parameters: unknown keys, option values
// realmfs would refuse, and the policy (policy.Parse: the error names the
// line and field, "policy:3: credentials.deny[0]: ...").
func parseParams(m map[string]string) (volumeParams, error) {
	var p volumeParams
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch {
		case k == paramPolicy:
			p.policy = v
		case k == paramPolicyName:
			if !validPolicyName.MatchString(v) {
				return p, errf(codes.InvalidArgument, "parameter policyName=%q: want a file name of the policy dir without .yaml", v)
			}
			p.policyName = v
		case k == paramLockOwner:
			if !slices.Contains([]string{"cgroup", "session", "pid"}, v) {
				return p, errf(codes.InvalidArgument, "parameter lockowner=%q: want cgroup, session or pid", v)
			}
			p.lockOwner = v
		case k == paramDurability:
			if v != "full" && v != "atomic" {
				return p, errf(codes.InvalidArgument, "parameter durability=%q: want full or atomic", v)
			}
			p.durability = v
		case k == paramSize:
			n, err := ParseSize(v)
			if err != nil || n == 0 {
				return p, errf(codes.InvalidArgument, "parameter size=%q: want a positive size in bytes, or with a suffix k, M, G, T or Ki, Mi, Gi, Ti (e.g. 2Gi)", v)
			}
			p.size = n
		case strings.HasPrefix(k, k8sPrefix):
		default:
			return p, errf(codes.InvalidArgument, "unknown parameter %q (known: policy, policyName, lockowner, durability, size)", k)
		}
	}
	if p.policyName != "" && strings.TrimSpace(p.policy) != "" {
		return p, errf(codes.InvalidArgument, "parameters policy and policyName: give one policy")
	}
	if strings.TrimSpace(p.policy) == "" {
		p.policy = "" // the built-in policy, as if none were given
		return p, nil
	}
	if _, err := policy.Parse(paramPolicy, []byte(p.policy)); err != nil {
		return p, errf(codes.InvalidArgument, "invalid policy: %v", err)
	}
	return p, nil
}

// validPolicyName is a policy file's name in the policy dir: one path
// element, not hidden.
var validPolicyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// checkParams is parseParams and, for a named policy, the file's check
// (policy.Load: an invalid file is InvalidArgument with its path, line
// and field; a missing one too).
func (d *Driver) checkParams(m map[string]string) (volumeParams, error) {
	p, err := parseParams(m)
	if err != nil || p.policyName == "" {
		return p, err
	}
	if d.cfg.PolicyDir == "" {
		return p, errf(codes.InvalidArgument, "parameter policyName=%q: the plugin holds no policies (--policy-dir)", p.policyName)
	}
	if _, err := policy.Load(d.policyPath(p.policyName)); err != nil {
		return p, errf(codes.InvalidArgument, "policy %q: %v", p.policyName, err)
	}
	return p, nil
}

func (d *Driver) policyPath(name string) string {
	return filepath.Join(d.cfg.PolicyDir, name+".yaml")
}

// options are the realmfs -o options of a mount of a volume with p. Other
// uids than the plugin's (the pod's user) use the mount: allow_other.
func (p volumeParams) options(readOnly bool, mountFlags []string) string {
	o := []string{"allow_other"}
	if p.lockOwner != "" {
		o = append(o, "lockowner="+p.lockOwner)
	}
	if p.durability != "" {
		o = append(o, "durability="+p.durability)
	}
	if readOnly {
		o = append(o, "ro")
	}
	return strings.Join(append(o, mountFlags...), ",")
}

// mountFlagNames are the realmfs -o options a volume's mount flags (a PV's
// or a StorageClass's mountOptions) may give: how the mount behaves. The
// others name files or directories the root daemon reads or writes
// (policy, journal_dir, log, audit_log, state_dir), what the driver relies
// on (fsname: it finds a volume's mounts by their source; ro, allow_other,
// nonempty, auto_unmount: its own), or keep realmfs in the foreground
// (debug): refused, so that none passes silently.
var mountFlagNames = map[string]bool{
	"durability": true, "lockowner": true, "passthrough": true, "watch": true,
	"journal": true, "journal_max": true, "journal_max_files": true, "journal_keep": true,
	"max_fds_per_owner": true, "default_permissions": true,
}

// checkMountFlags refuses a mount flag not in mountFlagNames, naming it
// and the ones taken (InvalidArgument).
func checkMountFlags(flags []string) error {
	for _, f := range flags {
		for o := range strings.SplitSeq(f, ",") {
			name, _, _ := strings.Cut(o, "=")
			if !mountFlagNames[name] {
				names := slices.Sorted(maps.Keys(mountFlagNames))
				return errf(codes.InvalidArgument, "mount flag %q: not one realm-csi passes to realmfs (it takes %s)", o, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// isNotExist is errors.Is(err, fs.ErrNotExist).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
