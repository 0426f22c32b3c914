package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A Record says where a running daemon writes: a mountpoint's audit log
// cannot be found from the mount itself (the kernel keeps no option of
// ours, and a daemon's command line may hold paths relative to a
// directory it has left, or none: the policy's audit.path). So each daemon
// writes one small JSON file once mounted, MAJOR:MINOR.json, in the
// runtime directory: /run/realmfs as root (0755; the file 0644, naming
// paths only), else $XDG_RUNTIME_DIR/realmfs (the user's own, 0700). It
// is removed at unmount; one left by a killed daemon is recognised by its
// pid no longer being a realmfs and by another device's mount taking its
// place.
type Record struct {
	Pid        int    `json:"pid"`
	Backing    string `json:"backing"`
	Mountpoint string `json:"mountpoint"`
	AuditLog   string `json:"audit_log,omitempty"`
	Log        string `json:"log,omitempty"`
}

// ErrNoRuntimeDir: a daemon of a user without XDG_RUNTIME_DIR keeps no
// record (a directory of its own it could trust is what the variable
// names).
var ErrNoRuntimeDir = errors.New("no XDG_RUNTIME_DIR: realmfs audit MOUNTPOINT cannot find this mount's audit log (give it the file)")

// recordDirs are the directories a record may be in, the writer's first:
// root's, then (for a reader that is not root) the user's own. Root reads
// root's only: a user's directory could name any file.
func recordDirs(uid int) []string {
	dirs := []string{"/run/realmfs"}
	if uid == 0 {
		return dirs
	}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		dirs = append(dirs, filepath.Join(rt, "realmfs"))
	}
	return dirs
}

// recordName is the record's file name for the mount of device dev:
// MAJOR:MINOR.json, the device as mountinfo writes it.
func recordName(dev uint64) string {
	return fmt.Sprintf("%d:%d.json", unix.Major(dev), unix.Minor(dev))
}

// WriteRecord writes rec for the mount of device dev, and returns its
// removal. A daemon without a runtime directory (a user without
// XDG_RUNTIME_DIR) writes none, and says so with ErrNoRuntimeDir.
func WriteRecord(dev uint64, rec Record) (remove func(), err error) {
	uid := os.Geteuid()
	dirs := recordDirs(uid)
	dir, mode := dirs[0], os.FileMode(0o755)
	if uid != 0 {
		var st unix.Stat_t
		if len(dirs) < 2 || unix.Stat(filepath.Dir(dirs[1]), &st) != nil || int(st.Uid) != uid {
			return func() {}, ErrNoRuntimeDir // none, or another user's (an environment passed on)
		}
		dir, mode = dirs[1], 0o700
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return func() {}, fmt.Errorf("mount record: %w", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return func() {}, err
	}
	path := filepath.Join(dir, recordName(dev))
	tmp := path + ".tmp" + strconv.Itoa(rec.Pid)
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return func() {}, fmt.Errorf("mount record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return func() {}, fmt.Errorf("mount record: %w", err)
	}
	return func() { os.Remove(path) }, nil
}

// FindRecord is the record of the realmfs mount at mnt (an absolute path,
// symlinks resolved). ok false: mnt is no realmfs mount.
func FindRecord(mnt string) (rec Record, ok bool, err error) {
	m, ok, err := MountAt(mnt)
	if err != nil || !ok {
		return Record{}, false, err
	}
	rec, err = readRecord(Device(m), mnt)
	return rec, true, err
}

// readRecord reads the record of the mount of device dev at mnt, and
// checks it is the live daemon's.
func readRecord(dev uint64, mnt string) (Record, error) {
	var tried []string
	for _, dir := range recordDirs(os.Geteuid()) {
		path := filepath.Join(dir, recordName(dev))
		b, err := os.ReadFile(path)
		if err != nil {
			tried = append(tried, path)
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return rec, fmt.Errorf("%s: %w", path, err)
		}
		if rec.Mountpoint != mnt || !isRealmfs(rec.Pid) {
			return rec, fmt.Errorf("%s: a record left by a daemon gone (pid %d, %s), not this mount's", path, rec.Pid, rec.Mountpoint)
		}
		return rec, nil
	}
	return Record{}, fmt.Errorf("%s: no record of its daemon (looked for %v; a daemon older than this realmfs, or of another user): give its audit log FILE", mnt, tried)
}

// isRealmfs reports whether process pid runs a program named realmfs
// (realmfs-*: a test build).
func isRealmfs(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.HasPrefix(string(b), "realmfs")
}
