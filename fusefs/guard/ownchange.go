package guard

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/locks"
)

// OwnChange runs change, a change the mount makes that moves the ctime of
// the files held by fds (a chmod, an xattr, a link or unlink of another
// name, a rename, a write in place; an fd of -1 is skipped), and restamps
// each that is a made file, so that the mount's own change does not make
// it host-placed. Each made file's look just before the change must be
// the set's (Check): one changed behind the mount since its last check
// becomes host-placed here, and is not restamped. The mount's own changes
// of made files are serialized (madeOpMu), so that one's look before is
// never another's look after. A check of the file by another request
// while the change is under way sees the change and takes the file for
// host-placed (closed: a refusal, never a leak). It returns change's error.
func (g *Guard) OwnChange(fds []int, change func() error) error {
	if g.Policy == nil || !g.anyMade(fds) {
		return change()
	}
	g.madeOpMu.Lock()
	defer g.madeOpMu.Unlock()
	type held struct {
		fd     int
		id     ID
		before unix.Stat_t
	}
	var hs []held
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		var h held
		gen, err := dirfd.Statx(fd, "", &h.before)
		if err != nil {
			continue
		}
		h.fd, h.id = fd, ID{Key: locks.KeyOf(&h.before), Gen: gen}
		switch g.Made.Check(h.id, &h.before) {
		case MadeFresh:
			hs = append(hs, h)
		case MadeChanged:
			g.Creds.Add(h.id) // host-placed from now on, under every name
		}
	}
	err := change()
	for _, h := range hs {
		var after unix.Stat_t
		if dirfd.Fstat(h.fd, &after) == nil {
			g.Made.Restamp(h.id, &h.before, &after)
		}
	}
	return err
}

// MadeFd opens name in the directory held by dir (O_PATH) when it may be
// a made file, for OwnChange, or returns -1 (dirfd.Close skips it). With
// no made file in the set it looks at nothing: a file made meanwhile by
// another request races this look as it would race the stat.
func (g *Guard) MadeFd(dir int, name string) int {
	var st unix.Stat_t
	if g.Policy == nil || g.Made.Len() == 0 || dirfd.Lstat(dir, name, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || !g.Made.Holds(locks.KeyOf(&st)) {
		return -1
	}
	fd, err := dirfd.OpenPath(dir, name)
	if err != nil {
		return -1
	}
	return fd
}

// anyMade reports whether a file held by one of fds may be a made file.
func (g *Guard) anyMade(fds []int) bool {
	for _, fd := range fds {
		var st unix.Stat_t
		if fd >= 0 && dirfd.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && g.Made.Holds(locks.KeyOf(&st)) {
			return true
		}
	}
	return false
}
