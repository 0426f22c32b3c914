package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

// TestDiscoverPodman: the order podman itself uses, with the environment
// set as a person's shell would.
func TestDiscoverPodman(t *testing.T) {
	xdg := "/run/user/1000"
	rootless := "unix://" + xdg + "/podman/podman.sock"
	tests := []struct {
		name       string
		socket     string
		connection string
		host       string // CONTAINER_HOST
		xdg        string
		exists     []string
		euid       int
		want       PodmanEndpoint
	}{
		{"--podman-socket wins over all", "unix:///a.sock", "unix:///b.sock", "unix:///c.sock", xdg, []string{RootPodmanSocket}, 0,
			PodmanEndpoint{"unix:///a.sock", "--podman-socket"}},
		{"--connection over CONTAINER_HOST", "", "unix:///b.sock", "unix:///c.sock", xdg, []string{RootPodmanSocket}, 0,
			PodmanEndpoint{"unix:///b.sock", "--connection"}},
		{"CONTAINER_HOST over the sockets", "", "", "unix:///c.sock", xdg, []string{RootPodmanSocket}, 1000,
			PodmanEndpoint{"unix:///c.sock", "CONTAINER_HOST"}},
		{"both exist, root: the root socket", "", "", "", xdg, []string{RootPodmanSocket, xdg + "/podman/podman.sock"}, 0,
			PodmanEndpoint{"unix://" + RootPodmanSocket, "root socket"}},
		{"both exist, a user: the rootless socket", "", "", "", xdg, []string{RootPodmanSocket, xdg + "/podman/podman.sock"}, 1000,
			PodmanEndpoint{rootless, "rootless socket"}},
		{"only the root socket exists, a user: the root socket", "", "", "", xdg, []string{RootPodmanSocket}, 1000,
			PodmanEndpoint{"unix://" + RootPodmanSocket, "root socket"}},
		{"rootless socket when only it exists", "", "", "", xdg, []string{xdg + "/podman/podman.sock"}, 0,
			PodmanEndpoint{rootless, "rootless socket"}},
		{"none exists, root: the root socket", "", "", "", xdg, nil, 0,
			PodmanEndpoint{"unix://" + RootPodmanSocket, "root socket"}},
		{"none exists, a user: the rootless socket", "", "", "", xdg, nil, 1000,
			PodmanEndpoint{rootless, "rootless socket"}},
		{"none exists, a user without XDG_RUNTIME_DIR: /run/user/UID", "", "", "", "", nil, 1001,
			PodmanEndpoint{"unix:///run/user/1001/podman/podman.sock", "rootless socket"}},
		{"none exists, root without XDG_RUNTIME_DIR", "", "", "", "", nil, 0,
			PodmanEndpoint{"unix://" + RootPodmanSocket, "root socket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CONTAINER_HOST", tt.host)
			t.Setenv("XDG_RUNTIME_DIR", tt.xdg)
			got := DiscoverPodman(PodmanLookup{
				Socket: tt.socket, Connection: tt.connection, Euid: tt.euid,
				Exists: func(p string) bool {
					for _, e := range tt.exists {
						if e == p {
							return true
						}
					}
					return false
				},
			})
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConnectErrors: a real missing socket and a real socket nobody
// listens on each say their cause and the command that fixes it.
func TestConnectErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	dead := filepath.Join(dir, "dead.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the socket file stays; nothing listens on it

	tests := []struct {
		uri  string
		want []string
	}{
		{"unix://" + missing, []string{"does not exist", "podman system service --time=0 unix://" + missing}},
		{"unix://" + dead, []string{"nothing listens", "podman system service --time=0 unix://" + dead}},
	}
	for _, tt := range tests {
		_, err := Connect(context.Background(), tt.uri)
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.RealmNotActive {
			t.Errorf("Connect(%s) = %v, want REALM_NOT_ACTIVE", tt.uri, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("Connect(%s): %q lacks %q", tt.uri, e.Message, w)
			}
		}
	}

	// EACCES cannot be had as root; the classification is checked on the
	// error the dialer returns, and so are the fixes of the two defaults.
	eacces := &net.OpError{Op: "dial", Net: "unix", Err: fmt.Errorf("connect: %w", syscall.EACCES)}
	if m := connectError(eacces, "unix://"+RootPodmanSocket).Message; !strings.Contains(m, "no permission") || !strings.Contains(m, "systemctl --user start podman.socket") {
		t.Errorf("EACCES: %q", m)
	}
	enoent := fmt.Errorf("dial: %w", syscall.ENOENT)
	if m := connectError(enoent, "unix:///run/user/1000/podman/podman.sock").Message; !strings.Contains(m, "systemctl --user start podman.socket") {
		t.Errorf("rootless ENOENT: %q", m)
	}
	if m := connectError(enoent, "unix:///tmp/xdg/podman/podman.sock").Message; !strings.Contains(m, "systemctl --user start podman.socket") ||
		!strings.Contains(m, "podman system service --time=0 unix:///tmp/xdg/podman/podman.sock") {
		t.Errorf("rootless ENOENT under another XDG_RUNTIME_DIR: %q", m)
	}
	if m := connectError(enoent, "unix://"+RootPodmanSocket).Message; !strings.Contains(m, "systemctl start podman.socket") {
		t.Errorf("root ENOENT: %q", m)
	}
}
