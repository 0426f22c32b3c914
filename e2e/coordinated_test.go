package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Coordinated files (fusefs/inplace.go): SQLite's database, -wal, -shm and
// -journal are written in place and shared by every owner, so that a
// database two owners use works as it does on the host.

// walWriter commits one row per transaction in WAL mode, in a session of
// its own (a lock owner of its own under lockowner=session). It prints
// "ready" once the table exists, "half" after half of the rows, and waits
// for a line on stdin there (the test reads beside a connection that holds
// the WAL and its mapping mid-way), then "done" with its count, and holds
// its connection open until stdin closes.
const walWriter = `
import sqlite3, sys
n = int(sys.argv[1])
db = sqlite3.connect("app.db", timeout=30, isolation_level=None)
db.execute("pragma journal_mode=wal")
db.execute("create table if not exists t(id integer primary key, v text)")
print("ready", flush=True)
for i in range(n):
    db.execute("begin immediate")
    db.execute("insert into t(v) values(?)", ("row %d" % i,))
    db.execute("commit")
    if i == n // 2:
        print("half", flush=True)
        sys.stdin.readline()
print("done", db.execute("select count(*) from t").fetchone()[0], flush=True)
sys.stdin.read()
db.close()
`

// TestSQLiteWALTwoOwners: a writer commits 300 transactions while another
// owner's sqlite3 reads the database 40 times (the last ten also write a
// row of their own): every process exits 0, no read sees an I/O error,
// counts only grow, and every row is there. Before coordinated files the
// reader's F_GETLK on the -shm did not see the writer's lock, it took
// itself for the first connection and truncated the -shm, and the writer
// died of SIGBUS (issue 34).
//
// Both ways the mount serves a coordinated file: passed through to the
// backing file (the kernel reads, writes and maps it), and through the
// daemon and the kernel's page cache (passthrough=off, or not root).
func TestSQLiteWALTwoOwners(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3", "sqlite3", "setsid")
	for _, opts := range []string{"lockowner=session", "lockowner=session,passthrough=off"} {
		t.Run(opts, func(t *testing.T) { sqliteWALTwoOwners(t, mount(t, Opts(opts))) })
	}
	// Passed through: where BACKING's file system keeps no blocks for
	// root (this machine's disk may keep some, and then coordinated files
	// go through the daemon: TestRootReserveKeptCoordinated).
	t.Run("lockowner=session,no root reserve", func(t *testing.T) {
		m := mount(t, Opts("lockowner=session"), Ext4Backing(t, 128<<20, 0, nil))
		if !strings.Contains(readFile(t, m.LogFile), "passthrough=on ") {
			t.Errorf("the daemon's mounted line does not say passthrough=on (coordinated files passed through):\n%s", m.logTail())
		}
		sqliteWALTwoOwners(t, m)
	})
}

func sqliteWALTwoOwners(t *testing.T, m *Mount) {
	const rows = 300
	cmd := exec.Command("setsid", "python3", "-u", "-c", walWriter, strconv.Itoa(rows))
	cmd.Dir = m.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	w := startProc(t, cmd, true)
	if got := w.line(t, 2*time.Minute, "writer ready"); got != "ready" {
		t.Fatalf("writer: %q, stderr: %s", got, stderr.String())
	}
	last := -1
	read := func(i int, sql string) {
		t.Helper()
		// Another session: another owner. sqlite3 waits for the writer's
		// lock as any second connection does (.timeout).
		c := exec.Command("setsid", "sqlite3", "-cmd", ".timeout 30000", "app.db", sql)
		c.Dir = m.Dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("read %d by another owner: %v: %s", i, err, out)
		}
		fields := strings.Fields(string(out))
		if len(fields) != 1 {
			t.Fatalf("read %d by another owner: %q", i, out)
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil || n < last || n > rows {
			t.Fatalf("read %d by another owner: count %q after %d", i, fields[0], last)
		}
		last = n
	}
	for i := range 20 {
		read(i, "select count(*) from t")
	}
	if got := w.line(t, 2*time.Minute, "writer half way"); got != "half" {
		t.Fatalf("writer: %q, stderr: %s", got, stderr.String())
	}
	for i := 20; i < 30; i++ {
		read(i, "select count(*) from t")
	}
	io.WriteString(w.stdin, "go on\n")
	for i := 30; i < 40; i++ {
		read(i, "create table if not exists o(x); insert into o(x) values(1); select count(*) from t")
	}
	got := w.line(t, 2*time.Minute, "writer done")
	w.closeStdin()
	if err := w.wait(); err != nil {
		t.Fatalf("writer: %v (a SIGBUS is the kernel cutting its -shm mapping short), stderr: %s", err, stderr.String())
	}
	if got != fmt.Sprintf("done %d", rows) {
		t.Errorf("writer's own count: %q, want done %d", got, rows)
	}
	check := exec.Command("setsid", "sqlite3", "app.db", "pragma integrity_check; select count(*) from t; select count(*) from o")
	check.Dir = m.Dir
	out, err := check.CombinedOutput()
	if want := fmt.Sprintf("ok\n%d\n10\n", rows); err != nil || string(out) != want {
		t.Errorf("after both: %v: %q, want %q", err, out, want)
	}
	if strings.Contains(stderr.String(), "disk I/O error") {
		t.Errorf("writer saw an I/O error: %s", stderr.String())
	}
	if _, err := os.Stat(m.BackingPath("app.db")); err != nil {
		t.Errorf("database in BACKING: %v", err)
	}
}

// byteLocker takes a write lock on byte 128 of its file (SQLite's first
// WAL-index lock byte) and reports it, then holds it until stdin closes.
const byteLocker = `
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
print("locked", flush=True)
sys.stdin.read()
`

// lockProbe asks F_GETLK for a write lock on byte 128 and prints the type
// of the lock that conflicts (F_UNLCK: none).
const lockProbe = `
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
req = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 128, 1, 0)
typ = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, req))[0]
print({fcntl.F_UNLCK: "unlocked", fcntl.F_RDLCK: "read", fcntl.F_WRLCK: "write"}[typ])
`

// TestRecordLocksSeenByEveryOwner: F_GETLK by one owner reports the lock
// another owner holds, as on the host: on a coordinated file, and on a
// plain one that the holder has open for writing (the other owner may
// only read it: the lock table holds the write).
func TestRecordLocksSeenByEveryOwner(t *testing.T) {
	t.Parallel()
	requireTool(t, "python3", "setsid")
	for _, opts := range []string{"lockowner=session", "lockowner=session,passthrough=off"} {
		t.Run(opts, func(t *testing.T) { recordLocksSeen(t, mount(t, Opts(opts))) })
	}
}

func recordLocksSeen(t *testing.T, m *Mount) {
	for _, name := range []string{"app.db-shm", "app.db", "plain.txt"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("setsid", "python3", "-u", "-c", byteLocker, name)
			cmd.Dir = m.Dir
			h := startProc(t, cmd, true)
			if got := h.line(t, time.Minute, "lock held"); got != "locked" {
				t.Fatalf("holder: %q", got)
			}
			probe := exec.Command("setsid", "python3", "-c", lockProbe, name)
			probe.Dir = m.Dir
			out, err := probe.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "write" {
				t.Errorf("another owner's F_GETLK on %s: %v: %q, want write", name, err, out)
			}
			h.closeStdin()
			if err := h.wait(); err != nil {
				t.Errorf("holder: %v", err)
			}
		})
	}
}

// TestCoordinatedHostMeaning: a coordinated file written in place means no
// more on the host than any other write (threat (H)): a host file's
// set-ID bits go (the file takes the ordinary route, whose new content
// drops them), a file capability goes with the write, and a credential or
// protected path at a coordinated name is refused as any other, audited.
func TestCoordinatedHostMeaning(t *testing.T) {
	requireTool(t, "setcap", "getcap")
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, policy, "version: 1\ncredentials:\n  deny: ['vault/**']\n")
	m := mount(t, Flags("--policy", policy), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("suid.db"), "host\n")
		if err := unix.Chmod(m.BackingPath("suid.db"), 04755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.BackingPath("cap.db"), "host\n")
		run(t, "/", nil, "setcap", "cap_dac_read_search+ep", m.BackingPath("cap.db"))
		if err := os.MkdirAll(m.BackingPath("vault"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.BackingPath("vault", "keys.db"), "secret\n")
		if err := os.MkdirAll(m.BackingPath(".git", "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
	}))
	for _, name := range []string{"suid.db", "cap.db"} {
		f, err := os.OpenFile(m.Path(name), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		if _, err := f.WriteAt([]byte("mount\n"), 0); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close %s: %v", name, err)
		}
		if got := readFile(t, m.BackingPath(name)); got != "mount\n" {
			t.Errorf("BACKING/%s after the write: %q", name, got)
		}
	}
	noSetID(t, m.BackingPath("suid.db"), "after a write through the mount")
	if out := strings.TrimSpace(run(t, "/", nil, "getcap", m.BackingPath("cap.db"))); out != "" {
		t.Errorf("BACKING/cap.db keeps a file capability after a write through the mount: %s", out)
	}

	_, err := os.OpenFile(m.Path("vault", "keys.db"), os.O_RDWR, 0)
	wantErrno(t, err, unix.EACCES, "open of the credential vault/keys.db")
	m.WaitRefusal("open", "vault/keys.db", "CREDENTIAL_PATH_DENIED", unix.EACCES)
	err = os.WriteFile(m.Path(".git", "hooks", "pre-commit.db"), []byte("x"), 0o644)
	if err == nil {
		t.Errorf("a coordinated name under .git/hooks was made through the mount")
	}
	if got := readFile(t, m.BackingPath("vault", "keys.db")); got != "secret\n" {
		t.Errorf("BACKING/vault/keys.db: %q", got)
	}
}
