package rundir

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ControlDir is where uid's daemons keep their control sockets (xdg: the
// user's XDG_RUNTIME_DIR, if known).
func ControlDir(uid int, xdg string) string {
	if uid == 0 {
		return "/run/realmfs"
	}
	return filepath.Join(cmp.Or(xdg, "/run/user/"+strconv.Itoa(uid)), "realmfs")
}

// ControlPath is the control socket of the mount with device number dev
// in dir: MAJOR:MINOR.sock.
func ControlPath(dir string, dev uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d:%d.sock", unix.Major(dev), unix.Minor(dev)))
}

// ControlPathOf is the control socket of the realmfs mount at mnt (as
// mountinfo names it): by its device number, in the control directory of
// the user it was mounted by (its user_id).
func ControlPathOf(mnt string) (string, error) {
	m, ok, err := MountAt(mnt)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is not a realmfs mount", mnt)
	}
	uid := 0
	for _, o := range strings.Split(m.VFSOptions, ",") {
		if v, ok := strings.CutPrefix(o, "user_id="); ok {
			uid, _ = strconv.Atoi(v)
		}
	}
	xdg := ""
	if uid == os.Geteuid() {
		xdg = os.Getenv("XDG_RUNTIME_DIR")
	}
	return ControlPath(ControlDir(uid, xdg), Device(m)), nil
}
