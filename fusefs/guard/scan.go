package guard

import (
	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// ScanResult is what the mount-time scan found.
type ScanResult struct {
	Entries     int
	Credentials int
	TempRemoved int
	Err         error
}

// Scan walks the backing tree held by root once, at mount: it records the
// identity of every credential file (for its other names: hard links, bind
// mounts, the names it is renamed to) and protected file (scanEntry), and
// hands each hidden name (the mount's temps) to sweep, which removes it if
// a crash left it there and says so. The identity checks (IDs.Has) wait
// until it is done (StartScan): it runs while the mount serves.
func (g *Guard) Scan(root int, hidden func(name string) bool, sweep func(dir int, name string) bool) ScanResult {
	var res ScanResult
	defer g.scanDone()
	res.Err = walk(root, "", func(rel string, parent int, d dirfd.Dirent) bool {
		res.Entries++
		if hidden(d.Name) {
			if sweep(parent, d.Name) {
				res.TempRemoved++
			}
			return true
		}
		if d.Type != unix.DT_DIR && g.scanEntry(parent, d.Name, rel) {
			res.Credentials++
		}
		return true
	})
	return res
}
