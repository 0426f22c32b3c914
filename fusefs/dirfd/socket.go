package dirfd

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// Listen listens on a unix socket named name in the directory held by dir
// (a stale socket there, from a daemon killed before it could remove it,
// is replaced). The path bound is /proc/self/fd/N/name, which names that
// directory whatever its path and stays within sun_path's 108 bytes.
// Close of the listener leaves the name: Unlink it.
func Listen(dir int, name string) (*net.UnixListener, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := Lstat(dir, name, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, &net.OpError{Op: "listen", Net: "unix", Err: unix.EEXIST}
		}
		if err := Unlink(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, err
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: procPath(dir) + "/" + name, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	return l, nil
}

// Dial connects to the unix socket name in the directory held by dir.
func Dial(dir int, name string) (*net.UnixConn, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: procPath(dir) + "/" + name, Net: "unix"})
}

// PeerUID is the uid of the process at the other end of c (SO_PEERCRED).
func PeerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return cred.Uid, nil
}
