package e2e

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestNonRootMount: uid 65534 mounts its own workspace through the setuid
// fusermount3, as with sshfs: files it creates are its own, reads work
// (passthrough turns itself off), and fusermount3 -u as that user unmounts
// (the harness checks the daemon exits 0).
func TestNonRootMount(t *testing.T) {
	requireFUSE(t)
	openDevFuse(t)
	m := mount(t, AsUser(nobody, nobody), Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("pre.txt"), "made before the mount")
		writeFile(t, m.BackingPath("ro.txt"), "read-only")
		for _, n := range []string{"pre.txt", "ro.txt"} {
			if err := os.Chown(m.BackingPath(n), nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(m.BackingPath("ro.txt"), 0o444); err != nil {
			t.Fatal(err)
		}
		// A writable file in a directory its owner may not write.
		writeFile(t, m.BackingPath("rodir", "f"), "in a read-only dir")
		for _, n := range []string{"rodir", "rodir/f"} {
			if err := os.Chown(m.BackingPath(n), nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(m.BackingPath("rodir"), 0o555); err != nil {
			t.Fatal(err)
		}
	}))
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i % 251)
	}
	p := m.Path
	ops := []struct{ op, want string }{
		{"read:" + p("pre.txt"), "ok made before the mount"},
		{"write:" + p("new.txt") + ":made through the mount", "ok"},
		{"read:" + p("new.txt"), "ok made through the mount"},
		{"mkdir:" + p("dir"), "ok"},
		{"write:" + p("dir/inner") + ":inner", "ok"},
		{"symlink:" + p("dir/link") + ":inner", "ok"},
		{"read:" + p("dir/link"), "ok inner"},
		{"stat:" + p("new.txt"), "ok 65534 65534 100644"},
		{"stat:" + p("dir"), "ok 65534 65534 40755"},
		{"rename:" + p("new.txt") + ":" + p("dir/renamed.txt"), "ok"},
		{"readdir:" + p("dir"), "ok inner,link,renamed.txt"},
		{"symlink:" + p("escape") + ":/etc/passwd", "err EACCES"},
		// Its own file with mode 0444 is not writable, as natively: the
		// kernel checks the mode (default_permissions), since the daemon
		// opens files read-only and writes a temp.
		{"write:" + p("ro.txt") + ":overwritten", "err EACCES"},
		{"read:" + p("ro.txt"), "ok read-only"},
		// A commit replaces the directory entry: in a directory the
		// daemon's user may not write, the write open is refused and the
		// file is left as it was (README: atomic writes).
		{"write:" + p("rodir/f") + ":changed", "err EACCES"},
		{"read:" + p("rodir/f"), "ok in a read-only dir"},
	}
	var args []string
	for _, o := range ops {
		args = append(args, o.op)
	}
	got := probe(t, asNobody, args...)
	for i, o := range ops {
		if got[i] != o.want {
			t.Errorf("as uid 65534 on its own mount: %s = %q, want %q", o.op, got[i], o.want)
		}
	}
	for _, name := range []string{"dir", "dir/inner", "dir/link", "dir/renamed.txt"} {
		if st := lstat(t, m.BackingPath(name)); st.Uid != nobody || st.Gid != nobody {
			t.Errorf("BACKING %s owned by %d:%d, want 65534:65534", name, st.Uid, st.Gid)
		}
	}
	if got := readFile(t, m.BackingPath("ro.txt")); got != "read-only" {
		t.Errorf("BACKING ro.txt (mode 0444) = %q after a refused write", got)
	}
	if got := readFile(t, m.BackingPath("dir/renamed.txt")); got != "made through the mount" {
		t.Errorf("BACKING dir/renamed.txt = %q", got)
	}
	// A larger file written by root into BACKING reads back whole through the
	// user's mount (the normal read path, since passthrough needs root).
	if err := os.WriteFile(m.BackingPath("big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := probe(t, asNobody, "sum:"+p("big"))[0], "ok "+sum(big); got != want {
		t.Errorf("reading a 3 MiB file through the user's mount: %s, want %s", got, want)
	}
	if st := lstat(t, m.BackingPath("dir")); st.Uid != nobody {
		t.Errorf("BACKING dir owner %d", st.Uid)
	}
	if m.Pid <= 0 {
		t.Fatal("no daemon pid")
	}
	if uid := procUID(t, m.Pid); uid != nobody {
		t.Errorf("realmfs runs as uid %d, want 65534", uid)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("fusermount3 -u as uid 65534: %v", err)
	}
}

// openDevFuse makes /dev/fuse usable by every user for the test, as
// Debian's udev rule does (0666); some containers and VMs create it 0600,
// which fusermount3 cannot open for a normal user. The mode is restored.
func openDevFuse(t *testing.T) {
	t.Helper()
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o006 == 0o006 {
		return
	}
	t.Logf("/dev/fuse is %v; making it 0666 (the udev default) for this test", st.Mode().Perm())
	if err := os.Chmod("/dev/fuse", 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod("/dev/fuse", st.Mode().Perm()); err != nil {
			t.Errorf("restoring /dev/fuse's mode: %v", err)
		}
	})
}

// procUID is the real uid of a process.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	info, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.Sys().(*syscall.Stat_t).Uid)
}
