package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/realm-dev/realm/errcode"
)

// RootPodmanSocket is where a root Podman service listens (podman.socket).
const RootPodmanSocket = "/run/podman/podman.sock"

// PodmanEndpoint is the libpod API service realmctl talks to, and how it
// was chosen, so that an error can say which rule picked it.
type PodmanEndpoint struct {
	URI string // unix:///PATH
	Why string // "--podman-socket", "--connection", "CONTAINER_HOST", "root socket", "rootless socket", "default"
}

// PodmanLookup is what DiscoverPodman reads; tests fill it in.
type PodmanLookup struct {
	Socket     string // --podman-socket: wins over everything
	Connection string // --connection
	Getenv     func(string) string
	Exists     func(path string) bool // a socket file is there
	Euid       int
}

// DiscoverPodman picks the Podman service as podman itself does:
// --podman-socket (realm's own flag, which wins), then --connection, then
// CONTAINER_HOST, then the socket of this user's own service: root's
// /run/podman/podman.sock for root, the rootless
// $XDG_RUNTIME_DIR/podman/podman.sock (XDG_RUNTIME_DIR unset:
// /run/user/UID, as podman falls back) for anyone else. When this user's
// socket does not exist but the other one does, that one is used (a user
// may be let onto root's socket); when neither exists, this user's is
// returned, so that the connection error names it and how to start it.
func DiscoverPodman(l PodmanLookup) PodmanEndpoint {
	if l.Getenv == nil {
		l.Getenv = os.Getenv
	}
	if l.Exists == nil {
		l.Exists = func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.Mode().Type() == fs.ModeSocket
		}
	}
	switch {
	case l.Socket != "":
		return PodmanEndpoint{l.Socket, "--podman-socket"}
	case l.Connection != "":
		return PodmanEndpoint{l.Connection, "--connection"}
	case l.Getenv("CONTAINER_HOST") != "":
		return PodmanEndpoint{l.Getenv("CONTAINER_HOST"), "CONTAINER_HOST"}
	}
	root := PodmanEndpoint{"unix://" + RootPodmanSocket, "root socket"}
	runtimeDir := l.Getenv("XDG_RUNTIME_DIR")
	if runtimeDir == "" && l.Euid != 0 {
		runtimeDir = fmt.Sprintf("/run/user/%d", l.Euid)
	}
	var rootless PodmanEndpoint
	if runtimeDir != "" {
		rootless = PodmanEndpoint{"unix://" + filepath.Join(runtimeDir, "podman", "podman.sock"), "rootless socket"}
	}
	own, other := root, rootless
	if l.Euid != 0 {
		own, other = rootless, root
	}
	if !l.Exists(strings.TrimPrefix(own.URI, "unix://")) && other.URI != "" && l.Exists(strings.TrimPrefix(other.URI, "unix://")) {
		return other
	}
	return own
}

// connectError says why the service at uri could not be reached and what
// starts one: a missing socket, nothing listening on it, or no permission.
// It is REALM_NOT_ACTIVE; the message is realm's, the cause stays wrapped.
func connectError(err error, uri string) *errcode.Error {
	path := uri
	if u, perr := url.Parse(uri); perr == nil && u.Scheme == "unix" {
		path = u.Path
	}
	fix := podmanFix(path)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return errcode.Wrap(errcode.RealmNotActive, err,
			"no Podman service at %s: the socket %s does not exist; %s (or point realmctl at one: --podman-socket, --connection, CONTAINER_HOST)", uri, path, fix)
	case errors.Is(err, syscall.ECONNREFUSED):
		return errcode.Wrap(errcode.RealmNotActive, err,
			"no Podman service at %s: the socket exists but nothing listens on it (a service that stopped); %s", uri, fix)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return errcode.Wrap(errcode.RealmNotActive, err,
			"the Podman service at %s refused this user: no permission on %s; run realmctl as the socket's owner (root for %s), or use your own rootless service: systemctl --user start podman.socket", uri, path, RootPodmanSocket)
	}
	return errcode.Wrap(errcode.RealmNotActive, err, "the Podman service at %s does not answer; %s", uri, fix)
}

// podmanFix is the command that starts a service at path.
func podmanFix(path string) string {
	if path == RootPodmanSocket {
		return "start it with `systemctl start podman.socket` or `podman system service --time=0 unix://" + path + "`"
	}
	if strings.HasSuffix(path, "/podman/podman.sock") {
		// A rootless service's socket ($XDG_RUNTIME_DIR/podman/podman.sock).
		return "start your own (rootless) service with `systemctl --user start podman.socket` or `podman system service --time=0 unix://" + path + "`"
	}
	return "start one with `podman system service --time=0 unix://" + path + "`"
}

// String is the endpoint for messages.
func (e PodmanEndpoint) String() string { return fmt.Sprintf("%s (%s)", e.URI, e.Why) }
