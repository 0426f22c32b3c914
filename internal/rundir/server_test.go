package rundir

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type testReq struct {
	Op string `json:"op"`
}

type testReply struct {
	Echo  string `json:"echo,omitempty"`
	Error string `json:"error,omitempty"`
}

func echo(decode func(any) error) any {
	var req testReq
	if err := decode(&req); err != nil {
		return testReply{Error: err.Error()}
	}
	return testReply{Echo: req.Op}
}

func listenT(t *testing.T) (*Server, string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "realmfs")
	path := ControlPath(dir, unix.Mkdev(0, 77))
	s, err := Listen(dir, path, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir, path
}

func TestAskAnswered(t *testing.T) {
	s, dir, path := listenT(t)
	defer s.Close()
	if filepath.Base(path) != "0:77.sock" {
		t.Errorf("socket %s, want 0:77.sock", path)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Lstat(name)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", name, st.Mode().Perm(), err, want)
		}
	}
	var reply testReply
	if err := Ask(path, testReq{Op: "status"}, &reply); err != nil || reply.Echo != "status" {
		t.Fatalf("Ask = %+v, %v; want the echo of status", reply, err)
	}
}

func TestBadRequestNamed(t *testing.T) {
	s, _, path := listenT(t)
	defer s.Close()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "{not json\n")
	b, _ := io.ReadAll(conn)
	if !strings.Contains(string(b), "a bad request") {
		t.Fatalf("answer %q, want a bad request named", b)
	}
}

// TestCloseLeavesNoOneWaiting: a client that connected and sent nothing
// neither keeps Close waiting nor the socket's name behind.
func TestCloseLeavesNoOneWaiting(t *testing.T) {
	s, _, path := listenT(t)
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server has the connection once one request of another client
	// is answered after it (connections are accepted in order).
	var reply testReply
	if err := Ask(path, testReq{Op: "x"}, &reply); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
	if b, _ := io.ReadAll(conn); len(b) != 0 {
		t.Errorf("idle client read %q, want EOF", b)
	}
}

// TestListenReplacesStaleSocket: a socket a killed daemon left is
// replaced, and a directory opened to others is made the user's alone.
func TestListenReplacesStaleSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "realmfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := ControlPath(dir, unix.Mkdev(0, 78))
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	s, err := Listen(dir, path, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s.Close()
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}
	var reply testReply
	if err := Ask(path, testReq{Op: "y"}, &reply); err != nil || reply.Echo != "y" {
		t.Fatalf("Ask = %+v, %v", reply, err)
	}
}

// TestCloseLeavesTheNextDaemonsSocket: a daemon that closes its control
// socket after the next mount of its device number has listened at the
// same name (a daemon ends after its unmount) leaves the newcomer's socket
// in place; before, realmfs status and journal undo could not reach the
// live mount.
func TestCloseLeavesTheNextDaemonsSocket(t *testing.T) {
	old, dir, path := listenT(t)
	next, err := Listen(dir, path, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("the next daemon's Listen: %v", err)
	}
	defer next.Close()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	var reply testReply
	if err := Ask(path, testReq{Op: "next"}, &reply); err != nil || reply.Echo != "next" {
		t.Fatalf("after the old daemon's Close, Ask = %+v, %v; want the next daemon's answer", reply, err)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("after its own Close the socket is still there: %v", err)
	}
}

func TestControlDir(t *testing.T) {
	for _, tc := range []struct {
		uid  int
		xdg  string
		want string
	}{
		{0, "/run/user/0", "/run/realmfs"},
		{1000, "/run/user/1000", "/run/user/1000/realmfs"},
		{1000, "", "/run/user/1000/realmfs"},
		{1000, "/tmp/rt", "/tmp/rt/realmfs"},
	} {
		if got := ControlDir(tc.uid, tc.xdg); got != tc.want {
			t.Errorf("ControlDir(%d, %q) = %q, want %q", tc.uid, tc.xdg, got, tc.want)
		}
	}
}
