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
// writes one small JSON file once mounted, MAJOR:MINOR-PID.json (the
// mount's device, the daemon's pid), in the runtime directory:
// /run/realmfs as root (0755; the file 0644, naming paths only), else
// $XDG_RUNTIME_DIR/realmfs (the user's own, 0700). It is removed when the
// daemon ends. The pid is in the name because a device number is given to
// the next mount once this one is gone, and a daemon ends after its
// unmount: under MAJOR:MINOR.json alone, a daemon that ended as another
// mount took its number removed the newcomer's record. One left by a
// killed daemon is recognised by its pid no longer being a realmfs or its
// mountpoint being another's, and removed by the next daemon of its
// device.
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

// recordName is the record's file name for the mount of device dev by
// daemon pid: MAJOR:MINOR-PID.json, the device as mountinfo writes it.
func recordName(dev uint64, pid int) string {
	return fmt.Sprintf("%s-%d.json", devName(dev), pid)
}

// devName is dev as mountinfo writes it, MAJOR:MINOR.
func devName(dev uint64) string {
	return fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
}

// WriteRecord writes rec for the mount of device dev, and returns its
// removal, which removes this record only. A daemon without a runtime
// directory (a user without XDG_RUNTIME_DIR) writes none, and says so with
// ErrNoRuntimeDir.
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
	removeLeft(dir, dev)
	path := filepath.Join(dir, recordName(dev, rec.Pid))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return func() {}, fmt.Errorf("mount record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return func() {}, fmt.Errorf("mount record: %w", err)
	}
	return func() { os.Remove(path) }, nil
}

// removeLeft removes the records of device dev in dir that no live daemon
// keeps: killed daemons' (their pid no realmfs now), and the name older
// daemons wrote, MAJOR:MINOR.json. A live daemon's record is left, even
// one of a mount that is gone: it removes its own (the writer's own is
// replaced by its rename).
func removeLeft(dir string, dev uint64) {
	for _, path := range recordsOf(dir, dev) {
		var rec Record
		b, err := os.ReadFile(path)
		live := err == nil && json.Unmarshal(b, &rec) == nil &&
			path == filepath.Join(dir, recordName(dev, rec.Pid)) && isRealmfs(rec.Pid)
		if !live {
			os.Remove(path)
		}
	}
}

// recordsOf are the paths of the records of device dev in dir, older
// daemons' MAJOR:MINOR.json last.
func recordsOf(dir string, dev uint64) []string {
	paths, _ := filepath.Glob(filepath.Join(dir, devName(dev)+"-*.json"))
	return append(paths, filepath.Join(dir, devName(dev)+".json"))
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
// checks it is the live daemon's: of the records of dev (one each for a
// daemon that has not ended yet and the one that took its number), the one
// of a live realmfs that names mnt.
func readRecord(dev uint64, mnt string) (Record, error) {
	var left error
	for _, dir := range recordDirs(os.Geteuid()) {
		for _, path := range recordsOf(dir, dev) {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			var rec Record
			if err := json.Unmarshal(b, &rec); err != nil {
				left = fmt.Errorf("%s: %w", path, err)
				continue
			}
			if rec.Mountpoint != mnt || !isRealmfs(rec.Pid) {
				left = fmt.Errorf("%s: a record left by a daemon gone (pid %d, %s), not this mount's", path, rec.Pid, rec.Mountpoint)
				continue
			}
			return rec, nil
		}
	}
	if left != nil {
		return Record{}, left
	}
	var want []string
	for _, dir := range recordDirs(os.Geteuid()) {
		want = append(want, filepath.Join(dir, devName(dev)+"-PID.json"))
	}
	return Record{}, fmt.Errorf("%s: no record of its daemon (looked for %v; a daemon older than this realmfs, or of another user): give its audit log FILE", mnt, want)
}

// isRealmfs reports whether process pid runs a program named realmfs
// (realmfs-*: a test build).
func isRealmfs(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.HasPrefix(string(b), "realmfs")
}
