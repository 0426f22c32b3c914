package csidriver

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// needMounts skips a test that really mounts realmfs where it cannot (not
// root, or no /dev/fuse), and fails it instead in CI, where both must be.
func needMounts(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("this test mounts realmfs and CI must be able to: %s", why)
	}
	t.Skipf("this test mounts realmfs: %s", why)
}

var (
	realmfsOnce sync.Once
	realmfsBin  string
	realmfsErr  error
)

// buildRealmfs builds cmd/realmfs once per test binary into a temp dir,
// with the tags the podman bindings need, and returns its path.
func buildRealmfs(t *testing.T) string {
	t.Helper()
	realmfsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "realm-csi-test-")
		if err != nil {
			realmfsErr = err
			return
		}
		realmfsBin = filepath.Join(dir, "realmfs")
		cmd := exec.Command("go", "build", "-o", realmfsBin, "../cmd/realmfs")
		cmd.Env = append(os.Environ(), "GOFLAGS=-tags=remote,exclude_graphdriver_btrfs,containers_image_openpgp")
		if out, err := cmd.CombinedOutput(); err != nil {
			realmfsErr = fmt.Errorf("go build ./cmd/realmfs: %w\n%s", err, out)
		}
	})
	if realmfsErr != nil {
		t.Fatal(realmfsErr)
	}
	return realmfsBin
}

// TestMain removes the realmfs binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if realmfsBin != "" {
		os.RemoveAll(filepath.Dir(realmfsBin))
	}
	os.Exit(code)
}

// testDriver is a driver serving on a temp unix socket.
type testDriver struct {
	*Driver
	root, sock string
	logs       *syncBuffer // the driver's log, JSON lines
}

// syncBuffer is a bytes.Buffer the driver's goroutines write while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDriver serves a driver whose base and state dirs are in a temp dir;
// at the test's end the server stops and every realmfs mount of its
// volumes is unmounted (lazily: a failed test may leave one busy).
func startDriver(t *testing.T, realmfs string) *testDriver {
	t.Helper()
	root := t.TempDir()
	logs := &syncBuffer{}
	d, err := New(Config{
		NodeID: "node-1", BaseDir: filepath.Join(root, "base"), StateDir: filepath.Join(root, "state"),
		Realmfs: realmfs, Version: "test", Log: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "csi.sock")
	lis, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := d.Server()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		unmountAll(t, d)
		d.Close()
	})
	return &testDriver{Driver: d, root: root, sock: sock, logs: logs}
}

// unmountAll detaches every realmfs mount of d's volumes.
func unmountAll(t *testing.T, d *Driver) {
	mounts, err := d.volumeMounts("")
	if err != nil {
		t.Errorf("mountinfo: %v", err)
		return
	}
	for _, m := range mounts {
		t.Errorf("left mounted: %s (volume %s)", m.Mountpoint, filepath.Base(m.Source))
		_ = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
	}
}

// running reports whether pid is a live process: not gone and not a
// zombie (an exited daemon waits in that state until init reaps it).
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
