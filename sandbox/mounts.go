package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/realm-dev/realm/errcode"
)

// FSType is the file system type realmfs mounts show in mountinfo.
const FSType = "fuse.realmfs"

// MountOptions are the realmfs options of every session mount: other uids
// (the container's user) may use it, the kernel checks permission bits,
// each container's cgroup is its own lock owner, and the journal of
// changes records what each changes (realmctl session diff|undo).
const MountOptions = "allow_other,default_permissions,lockowner=cgroup,journal=on"

// mountStartTimeout bounds a realmfs start (it exits once the mount is ready).
const mountStartTimeout = 30 * time.Second

// Mounts starts and stops the guarded mounts of workspaces: one realmfs
// mount per workspace at <Dir>/<key>, where key is derived from the
// workspace's path. Which sessions use a mount is not counted here but read
// from the session records (the Manager does), so no counter can drift from
// the records after a crash.
type Mounts struct {
	Dir     string // <state>/mounts
	Realmfs string // path of the realmfs binary
}

// NewMounts returns the mounts of a state dir.
func NewMounts(stateDir, realmfs string) *Mounts {
	return &Mounts{Dir: filepath.Join(stateDir, "mounts"), Realmfs: realmfs}
}

// mountMeta is <Dir>/<key>.json: which workspace and policy a mount serves.
type mountMeta struct {
	Workspace string `json:"workspace"`
	Policy    string `json:"policy,omitempty"`
	PolicySum string `json:"policySha256,omitempty"`
}

// Path is the mountpoint of workspace (an absolute, symlink-free path).
func (m *Mounts) Path(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return filepath.Join(m.Dir, hex.EncodeToString(sum[:8]))
}

// Alive reports whether a realmfs mount is at mnt and its daemon answers.
// A mount whose daemon died is listed but answers ENOTCONN. statfs is the
// probe because the kernel always asks the daemon for it, where a stat may
// be answered from cached attributes.
func Alive(mnt string) bool {
	if !IsRealmfsMount(mnt) {
		return false
	}
	var st syscall.Statfs_t
	return syscall.Statfs(mnt, &st) == nil
}

// IsRealmfsMount reports whether mountinfo lists a realmfs mount at mnt.
func IsRealmfsMount(mnt string) bool {
	found, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return i.Mountpoint != mnt || i.FSType != FSType, false
	})
	return err == nil && len(found) > 0
}

// CheckPolicy refuses a session whose policy differs from the one the
// workspace's live mount was started with: sessions sharing a workspace
// share its mount, its lock table and so its policy.
func (m *Mounts) CheckPolicy(workspace, policyPath string) error {
	mnt := m.Path(workspace)
	if !Alive(mnt) {
		return nil
	}
	meta, err := m.readMeta(mnt)
	if err != nil {
		return fmt.Errorf("the mount of workspace %s has no readable metadata (%s.json): %w", workspace, mnt, err)
	}
	sum, err := fileSum(policyPath)
	if err != nil {
		return errcode.Wrap(errcode.SchemaInvalid, err, "--policy %s: cannot read", policyPath)
	}
	if meta.PolicySum != sum {
		shown := meta.Policy
		if shown == "" {
			shown = "the default policy"
		}
		return errcode.New(errcode.SchemaInvalid,
			"workspace %s is already mounted for other sessions with %s; sessions on one workspace share its policy", workspace, shown)
	}
	return nil
}

// Acquire makes sure the guarded mount of workspace is up and returns its
// mountpoint: a live mount is reused, a dead one (its daemon gone) is
// detached first, and otherwise realmfs is started.
func (m *Mounts) Acquire(ctx context.Context, workspace, policyPath string) (string, error) {
	mnt := m.Path(workspace)
	if Alive(mnt) {
		return mnt, nil
	}
	if IsRealmfsMount(mnt) {
		if err := detach(mnt); err != nil {
			return "", fmt.Errorf("detach the dead mount at %s: %w", mnt, err)
		}
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return "", fmt.Errorf("make mountpoint %s: %w", mnt, err)
	}
	sum, err := fileSum(policyPath)
	if err != nil {
		return "", errcode.Wrap(errcode.SchemaInvalid, err, "--policy %s: cannot read", policyPath)
	}
	meta, _ := json.Marshal(mountMeta{Workspace: workspace, Policy: policyPath, PolicySum: sum})
	if err := writeFileAtomic(mnt+".json", meta); err != nil {
		return "", fmt.Errorf("record the mount of %s: %w", workspace, err)
	}

	// The daemon's own log (killed writers, conflict copies, the sweep,
	// mount and unmount) goes beside realmctl's lines about it, and stays
	// with the session's mount after it is released.
	args := []string{"-o", MountOptions, "--audit-log", mnt + ".audit.log", "--log", mnt + ".log"}
	if policyPath != "" {
		args = append(args, "--policy", policyPath)
	}
	args = append(args, workspace, mnt)
	logf, err := os.OpenFile(mnt+".log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open the realmfs log %s.log: %w", mnt, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s realmctl: starting %s %q\n", time.Now().Format(time.RFC3339), m.Realmfs, args)

	ctx, cancel := context.WithTimeout(ctx, mountStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.Realmfs, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// realmfs detaches its daemon; the daemon must not die with realmctl's
	// process group (a ^C of `realmctl session create`).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("realmfs could not mount %s at %s (%v; its log is %s.log)", workspace, mnt, err, mnt)
	}
	if !Alive(mnt) {
		return "", fmt.Errorf("realmfs reported a mount of %s at %s, but none answers (its log is %s.log)", workspace, mnt, mnt)
	}
	return mnt, nil
}

// Release unmounts mnt; the caller has made sure no session uses it. A
// clean unmount (fusermount3 -u) lets the daemon finish; if that fails the
// mount is detached lazily. The mountpoint and its metadata are removed; the
// audit log and realmfs log stay for people to read.
func (m *Mounts) Release(mnt string) error {
	if IsRealmfsMount(mnt) {
		var err error
		for i := 0; i < 10; i++ {
			if err = exec.Command("fusermount3", "-u", mnt).Run(); err == nil || !IsRealmfsMount(mnt) {
				err = nil
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			if err := detach(mnt); err != nil {
				return fmt.Errorf("unmount %s: %w", mnt, err)
			}
		}
	}
	os.Remove(mnt + ".json")
	if err := os.Remove(mnt); err != nil && !errors.Is(err, fs.ErrNotExist) && !IsRealmfsMount(mnt) {
		return fmt.Errorf("remove mountpoint %s: %w", mnt, err)
	}
	return nil
}

// detach unmounts mnt lazily: umount2(MNT_DETACH) as root, else
// fusermount3 -uz. Neither cares that a dead daemon's mount answers
// "transport endpoint is not connected".
func detach(mnt string) error {
	err := syscall.Unmount(mnt, syscall.MNT_DETACH)
	if err == nil || errors.Is(err, syscall.EINVAL) && !IsRealmfsMount(mnt) {
		return nil
	}
	if out, ferr := exec.Command("fusermount3", "-uz", mnt).CombinedOutput(); ferr != nil {
		_ = out // fusermount3's words are not realm's; the cause is err
		return fmt.Errorf("lazy unmount failed: %w", err)
	}
	return nil
}

func (m *Mounts) readMeta(mnt string) (*mountMeta, error) {
	data, err := os.ReadFile(mnt + ".json")
	if err != nil {
		return nil, err
	}
	var meta mountMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return nil, err
	}
	return &meta, nil
}

// fileSum is the hex SHA-256 of a file's content, or "" for no file.
func fileSum(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSpace(data))
	return hex.EncodeToString(sum[:]), nil
}
