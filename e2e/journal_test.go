package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
	"github.com/realm-dev/realm/fusefs/journal"
)

// journalRecords opens the journal of an unmounted BACKING and reads its
// records.
func journalRecords(t *testing.T, backing string) ([]journal.Record, *journal.Journal) {
	t.Helper()
	root, err := dirfd.OpenRoot(backing)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(root)
	j, err := journal.Open(root, journal.DefaultDir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	recs, err := j.Records(journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return recs, j
}

// keptText is what the journal keeps for change seq.
func keptText(t *testing.T, j *journal.Journal, seq uint64) string {
	t.Helper()
	fd, err := j.OpenKept(seq)
	if err != nil {
		t.Fatal(err)
	}
	defer dirfd.Close(fd)
	rfd, err := dirfd.Reopen(fd, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(rfd), "kept")
	defer f.Close()
	b := make([]byte, 1<<16)
	n, _ := f.Read(b)
	return string(b[:n])
}

// TestJournalOnByDefault: a mount with no journal option records its
// changes; a read-only one makes no journal in BACKING.
func TestJournalOnByDefault(t *testing.T) {
	t.Parallel()
	// A journal option that does not ask for the journal, so that
	// REALM_E2E_JOURNAL (Mount.opts) leaves the default as it is.
	m := mount(t, Opts("journal_keep=7d"))
	writeFile(t, m.Path("f"), "x")
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, _ := journalRecords(t, m.Backing)
	if len(recs) == 0 || recs[0].Op != journal.OpCreate || recs[0].Path != "f" {
		t.Errorf("records of a default mount: %+v, want the create of f first", recs)
	}
	ro := mount(t, Opts("ro", "journal_keep=7d"))
	if _, err := os.Lstat(ro.BackingPath(journal.DirName)); !os.IsNotExist(err) {
		t.Errorf("a read-only mount made %s: %v", journal.DirName, err)
	}
}

// TestJournalRealPrograms: with -o journal=on, real programs' changes of
// names leave their records, and what a rename replaced or an rm removed
// is kept; the journal's directory is not on the mount.
func TestJournalRealPrograms(t *testing.T) {
	m := mount(t, Opts("journal=on"))
	run(t, m.Dir, nil, "sh", "-c", "echo one > f && mkdir -p d/e && echo x > d/e/x && ln -s f l && sed -i s/one/two/ f && mv f g && cp g h && rm -r d && chmod 600 g")
	if _, err := os.Lstat(m.Path(journal.DirName)); !os.IsNotExist(err) {
		t.Errorf("%s on the mount: %v", journal.DirName, err)
	}
	if out := run(t, m.Dir, nil, "ls", "-a"); strings.Contains(out, journal.DirName) {
		t.Errorf("ls -a shows the journal:\n%s", out)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, j := journalRecords(t, m.Backing)
	var ops []string
	var sedRename *journal.Record
	for i, r := range recs {
		ops = append(ops, string(r.Op)+" "+r.Path+">"+r.To+" "+string(r.End))
		if r.Op == journal.OpRename && r.To == "f" && r.Replaced != nil {
			sedRename = &recs[i]
		}
	}
	got := strings.Join(ops, "\n")
	for _, want := range []string{
		"create f> done", "mkdir d> done", "mkdir d/e> done", "create d/e/x> done",
		"symlink l> done", "rename f>g done", "create h> done",
		"unlink d/e/x> done", "rmdir d/e> done", "rmdir d> done",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no record %q in:\n%s", want, got)
		}
	}
	if sedRename == nil {
		t.Fatalf("no record of sed -i's rename over f:\n%s", got)
	}
	if !sedRename.Kept || keptText(t, j, sedRename.Seq) != "one\n" {
		t.Errorf("sed -i's rename kept %v: %q, want \"one\\n\"", sedRename.Kept, keptText(t, j, sedRename.Seq))
	}
	for _, r := range recs {
		if r.Op == journal.OpUnlink && r.Path == "d/e/x" && keptText(t, j, r.Seq) != "x\n" {
			t.Errorf("rm kept %q of d/e/x, want \"x\\n\"", keptText(t, j, r.Seq))
		}
	}
}

// TestJournalKilledMidRewrites: kill -9 of the daemon in the middle of a
// loop of rewrites, then a remount: the journal's recovery leaves every
// record ended and the last done rewrite's After is the file's identity.
func TestJournalKilledMidRewrites(t *testing.T) {
	m := mount(t, Opts("journal=on"))
	if err := os.WriteFile(m.Path("f"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	written := make(chan int, 1000)
	stop := make(chan struct{})
	go func() {
		defer close(written)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(m.Path("f"), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
				return // the daemon is gone
			}
			written <- i
		}
	}()
	for i := range written {
		if i == 50 {
			break
		}
	}
	m.Kill() // while the loop goes on
	close(stop)
	for range written {
	}
	m.Restart()
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, j := journalRecords(t, m.Backing)
	var st syscall.Stat_t
	if err := syscall.Lstat(m.BackingPath("f"), &st); err != nil {
		t.Fatal(err)
	}
	var last *journal.Record
	for i, r := range recs {
		if r.End == "" {
			t.Errorf("record %d (%s %s) has no end after recovery", r.Seq, r.Op, r.Path)
		}
		if r.Op == journal.OpRewrite && r.Path == "f" && r.End == journal.Done {
			last = &recs[i]
		}
	}
	if last == nil {
		t.Fatalf("no done rewrite of f among %d records", len(recs))
	}
	if last.After == nil || last.After.Ino != st.Ino || last.After.Dev != uint64(st.Dev) {
		t.Errorf("the last done rewrite of f leaves %+v; f is %d:%d", last.After, st.Dev, st.Ino)
	}
	if last.Kept {
		fd, err := j.OpenKept(last.Seq)
		if err != nil {
			t.Errorf("the last rewrite's kept version: %v", err)
		} else {
			dirfd.Close(fd)
		}
	}
	if b, _ := os.ReadFile(m.LogFile); strings.Count(string(b), "journal opened") != 2 {
		t.Errorf("the daemon's log does not say twice what the journal's recovery found:\n%s", b)
	}
}

// TestJournalDirElsewhere: -o journal_dir on BACKING's filesystem keeps
// the journal there (nothing in BACKING); on another filesystem the mount
// is refused, naming both devices.
func TestJournalDirElsewhere(t *testing.T) {
	root := t.TempDir()
	backing, mnt, jdir := filepath.Join(root, "backing"), filepath.Join(root, "mnt"), filepath.Join(root, "journal")
	for _, d := range []string{backing, mnt, jdir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	other, err := os.MkdirTemp("/dev/shm", "realm-journal-")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(other)
	var a, b syscall.Stat_t
	if syscall.Stat(other, &a) == nil && syscall.Stat(root, &b) == nil && a.Dev != b.Dev {
		code, out := startRaw(t, mnt, nil, 15*time.Second, "-f", "-o", "journal=on,journal_dir="+other, backing, mnt)
		if code != 1 || !strings.Contains(out, "BACKING's filesystem") {
			t.Errorf("journal_dir on another filesystem: exit %d, %q; want 1 naming BACKING's filesystem", code, out)
		}
	}
	m := mount(t, Opts("journal=on", "journal_dir="+jdir))
	run(t, m.Dir, nil, "sh", "-c", "echo a > f && rm f")
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(m.BackingPath(journal.DirName)); !os.IsNotExist(err) {
		t.Errorf("%s in BACKING with journal_dir: %v", journal.DirName, err)
	}
	ents, err := os.ReadDir(filepath.Join(jdir, "kept"))
	if err != nil || len(ents) != 1 {
		t.Errorf("kept/ in journal_dir: %d entries, %v; want the file rm removed", len(ents), err)
	}
}

// TestJournalUnlinkRacesRenameOver: a process in BACKING makes d/b and
// renames it over d/a, again and again, while the mount's user unlinks
// d/a. (Through the mount the kernel's directory lock orders the two.)
// An unlink's record takes the lock table's look as what it removes; a
// rename over the name between that look and the removal sends the
// unlink back to look again (nameops.Ops.Remove). No unlink fails with
// anything but ENOENT, and what each done unlink kept is a version
// written, each at most once, the object its record names.
func TestJournalUnlinkRacesRenameOver(t *testing.T) {
	t.Parallel()
	const versions = 1500
	m := mount(t, Opts("journal=on"))
	if err := os.Mkdir(m.Path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range versions {
			if err := os.WriteFile(m.BackingPath("d/b"), []byte("v"+strconv.Itoa(i)), 0o644); err != nil {
				done <- err
				return
			}
			if err := os.Rename(m.BackingPath("d/b"), m.BackingPath("d/a")); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	unlinked := 0
	for writing := true; writing; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the writer in BACKING: %v", err)
			}
			writing = false
		default:
		}
		switch err := syscall.Unlink(m.Path("d/a")); err {
		case nil:
			unlinked++
		case syscall.ENOENT:
		default:
			t.Fatalf("unlink of d/a while BACKING renames over it: %v", err)
		}
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, j := journalRecords(t, m.Backing)
	kept := map[string]int{}
	aborted := 0
	for _, r := range recs {
		if r.Op != journal.OpUnlink {
			continue
		}
		if r.End == journal.Aborted {
			aborted++
			continue
		}
		v := keptText(t, j, r.Seq)
		if kept[v]++; !strings.HasPrefix(v, "v") || kept[v] > 1 {
			t.Errorf("unlink %d kept %q (%d times)", r.Seq, v, kept[v])
		}
		fd, err := j.OpenKept(r.Seq)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		dirfd.Close(fd)
		if err != nil || r.Before == nil || r.Before.Ino != st.Ino {
			t.Errorf("unlink %d names %+v, and kept inode %d (%v)", r.Seq, r.Before, st.Ino, err)
		}
	}
	if len(kept) != unlinked {
		t.Errorf("%d unlinks succeeded, %d versions kept", unlinked, len(kept))
	}
	t.Logf("%d unlinks removed a version; %d found another object than they looked at and looked again", unlinked, aborted)
}
