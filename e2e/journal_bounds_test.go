package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestJournalBounds: a journal over -o journal_max drops its oldest
// records when the daemon mounts (whole segments, with the versions their
// changes kept), and `realmfs journal list` then says which changes the
// bounds dropped; the changes made since are listed.
func TestJournalBounds(t *testing.T) {
	m := mount(t, Opts("journal=on"))
	writeFile(t, m.Path("old"), "old\n")
	writeFile(t, m.Path("old"), "older\n") // a rewrite: the version before is kept
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	recs, j := journalRecords(t, m.Backing)
	if len(recs) == 0 {
		t.Fatal("the first mount recorded nothing")
	}
	last := recs[len(recs)-1].Seq
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A segment alone is over 1 KiB: the mount drops every record so far.
	m.cfg.opts = []string{"journal=on", "journal_max=1K"}
	m.Restart()
	writeFile(t, m.Path("new"), "new\n")
	var out, errb bytes.Buffer
	cmd := exec.Command(realmfsBin, "journal", "list", m.Dir)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("realmfs journal list: %v\n%s", err, errb.String())
	}
	if strings.Contains(out.String(), "old") || !strings.Contains(out.String(), "new") {
		t.Errorf("journal list after the bound, want new's records and none of old's:\n%s", out.String())
	}
	if want := "dropped changes 1 to " + strconv.FormatUint(last, 10) + " "; !strings.Contains(errb.String(), want) {
		t.Errorf("journal list's stderr %q lacks %q", errb.String(), want)
	}
	kept, err := os.ReadDir(m.BackingPath(".realm-journal", "kept"))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 0 {
		t.Errorf("kept/ holds %d entries after the bound dropped every change that kept one", len(kept))
	}
	if b, _ := os.ReadFile(m.LogFile); !strings.Contains(string(b), "journal pruned") {
		t.Errorf("the daemon's log does not say what the bound dropped:\n%s", b)
	}
}

// The journal's bounds hold between prunes (docs/JOURNAL.md, Bounds): it
// counts what it keeps as it keeps it, bytes and files, and is pruned as
// soon as either passes its bound, so an owner's changes cannot fill
// BACKING's blocks or inodes with the journal's kept versions and starve
// another owner.

// ext4Backing mounts a fresh ext4 image of size bytes as m's BACKING,
// made with the extra mkfs.ext4 arguments.
func ext4Backing(t *testing.T, m *Mount, size int64, mkfs ...string) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting an ext4 image needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipped: no loop device (%v)", err)
	}
	requireTool(t, "mkfs.ext4")
	imageBacking(t, m, "ext4", size, func(img, dir string) {
		run(t, "", nil, "mkfs.ext4", append(append([]string{"-q", "-F"}, mkfs...), img)...)
		if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
			t.Skipf("skipped: mount -o loop of an ext4 image failed: %v: %s", err, out)
		}
	}, []string{"umount"})
}

// keptUsage is how many entries kept/ holds and their blocks in bytes
// (where the journal holds the only link, as prune weighs them).
func keptUsage(t *testing.T, backing string) (entries int, bytes int64) {
	dir := filepath.Join(backing, ".realm-journal", "kept")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, e.Name()), &st) == nil && (st.Nlink == 1 || st.Mode&unix.S_IFMT == unix.S_IFDIR) {
			bytes += st.Blocks * 512
		}
	}
	return len(ents), bytes
}

// TestJournalBoundsFreeInodes: an agent (its own session) that makes and
// removes empty files through the mount, twice as many as BACKING
// has inodes, does all of them: each removed file goes to the journal's
// kept/ and weighs no blocks, but the journal counts the files it holds
// and is pruned past journal_max_files (by default a tenth of BACKING's
// inodes, here about 100). Another owner's rewrite of its own file (which
// needs a temp) then works, and BACKING keeps free inodes.
func TestJournalBoundsFreeInodes(t *testing.T) {
	t.Parallel()
	const inodes = 1024
	m := mount(t, Opts("journal=on", "lockowner=session"), Prepare(func(m *Mount) {
		// 64 MiB, 1024 inodes; 5 % of blocks for root, as by default.
		ext4Backing(t, m, 64<<20, "-N", fmt.Sprint(inodes))
		writeFile(t, m.BackingPath("notes"), "the other owner's notes\n")
	}))
	var before unix.Statfs_t
	if err := unix.Statfs(m.Backing, &before); err != nil {
		t.Fatal(err)
	}

	// The agent: make empty files and remove them, 32 at a time (one rm
	// for each 32: the journal keeps every one all the same), stopping
	// at the first that fails.
	n := 2 * int(before.Files)
	agent, out := startSession(t, m.Dir, fmt.Sprintf(`i=0; while [ $i -lt %[1]d ]; do k=0; while [ $k -lt 32 ] && [ $i -lt %[1]d ]; do printf '' > f$i || break 2; i=$((i+1)); k=$((k+1)); done; rm f* || break; done; echo made-and-removed $i`, n))
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	got := strings.TrimSpace(out.String())

	var after unix.Statfs_t
	if err := unix.Statfs(m.Backing, &after); err != nil {
		t.Fatal(err)
	}
	entries, keptBytes := keptUsage(t, m.Backing)
	t.Logf("agent: %s; BACKING inodes: %d free of %d before, %d free after; kept/ holds %d entries weighing %d bytes",
		got, before.Ffree, before.Files, after.Ffree, entries, keptBytes)
	if want := fmt.Sprintf("made-and-removed %d", n); !strings.HasSuffix(got, want) {
		t.Errorf("the agent stopped: %q, want %q (BACKING has %d of %d inodes free; kept/ holds %d entries)",
			got, want, after.Ffree, after.Files, entries)
	}

	// The other owner (this test's session) rewrites its own file.
	if err := os.WriteFile(m.Path("notes"), []byte("new notes\n"), 0o644); err != nil {
		t.Errorf("another owner's rewrite of its own file after the agent made and removed %d empty files: %v "+
			"(BACKING has %d of %d inodes free; kept/ holds %d entries)", n, err, after.Ffree, after.Files, entries)
	}
}

// TestJournalBoundsBetweenPrunes: journal_max=16M, and an agent rewrites
// one 24 MiB file 16 times (each old version kept, each past the bound on
// its own; 384 MiB in all, more than BACKING holds unless the journal is
// pruned between them), removes it, then makes and removes 100 files of
// 1 MiB. The
// journal is pruned as soon as a version kept takes it past its bound,
// not when a segment fills or 4096 changes on: every rewrite fits in
// BACKING's 256 MiB, what kept/ holds at the end is within the bound and
// the version a prune may not have reached yet, and another owner's
// 1 MiB write works.
func TestJournalBoundsBetweenPrunes(t *testing.T) {
	t.Parallel()
	const fileSize, journalMax = 24 << 20, 16 << 20
	m := mount(t, Opts("journal=on", "lockowner=session", "journal_max=16M"), Prepare(func(m *Mount) {
		ext4Backing(t, m, 256<<20)
	}))
	// The content comes from files outside the mount, by cat: 128 KiB a
	// write, where head and tr wrote 8 KiB and took most of the test's
	// time (38 s of the suite's CPU-bound 5 minutes).
	big, small := filepath.Join(m.Outside, "big"), filepath.Join(m.Outside, "small")
	writeFile(t, big, strings.Repeat("x", fileSize))
	writeFile(t, small, string(make([]byte, 1<<20)))
	script := fmt.Sprintf(`i=0; while [ $i -lt 16 ]; do cat %s > big || break; i=$((i+1)); done; rm -f big; j=0; while [ $j -lt 100 ]; do cat %s > s$j || break; rm s$j; j=$((j+1)); done; echo rewrote $i, then made and removed $j files of 1 MiB`, big, small)
	agent, out := startSession(t, m.Dir, script)
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	got := strings.TrimSpace(out.String())
	entries, keptBytes := keptUsage(t, m.Backing)
	var st unix.Statfs_t
	if err := unix.Statfs(m.Backing, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent: %s; kept/: %d entries, %d MiB of blocks (journal_max 16 MiB); BACKING: %d MiB available to non-root",
		got, entries, keptBytes>>20, int64(st.Bavail)*st.Bsize>>20)
	if want := "rewrote 16, then made and removed 100 files of 1 MiB"; !strings.HasSuffix(got, want) {
		t.Errorf("the agent stopped: %q, want %q", got, want)
	}
	// A prune may be under way: at most the versions kept since it
	// weighed are past the bound (the last rewrite's and a few 1 MiB).
	if keptBytes > journalMax+fileSize {
		t.Errorf("kept/ holds %d MiB of blocks, past journal_max (16 MiB) by more than one version", keptBytes>>20)
	}
	if err := os.WriteFile(m.Path("other"), bytes.Repeat([]byte{'o'}, 1<<20), 0o644); err != nil {
		t.Errorf("another owner's 1 MiB write, with the journal holding %d MiB (journal_max=16M): %v", keptBytes>>20, err)
	}
}

// TestNewObjectsLeaveInodeReserve: an agent that makes empty files through
// the mount, and keeps them, is refused (ENOSPC) once BACKING's free
// inodes are down to the host's reserve (diskroom.InodeReserve), as a
// writer is for want of blocks: the host (root, in BACKING) can still
// make files.
func TestNewObjectsLeaveInodeReserve(t *testing.T) {
	t.Parallel()
	const inodes = 1024
	m := mount(t, Opts("journal=off", "lockowner=session"), Prepare(func(m *Mount) {
		ext4Backing(t, m, 64<<20, "-N", fmt.Sprint(inodes))
	}))
	agent, out := startSession(t, m.Dir, fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf '' > f$i 2>/dev/null || break; i=$((i+1)); done; echo made $i`, inodes))
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m.Backing, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent: %s; BACKING: %d of %d inodes free", strings.TrimSpace(out.String()), st.Ffree, st.Files)
	if st.Ffree == 0 {
		t.Fatalf("the agent took every inode of BACKING")
	}
	if strings.HasSuffix(strings.TrimSpace(out.String()), fmt.Sprintf("made %d", inodes)) {
		t.Errorf("the agent made %d files on a file system of %d inodes: nothing refused it", inodes, st.Files)
	}
	if err := os.WriteFile(m.BackingPath("host-file"), []byte("the host's\n"), 0o644); err != nil {
		t.Errorf("the host's file in BACKING after the agent was refused: %v", err)
	}
	if err := os.WriteFile(m.Path("one-more"), nil, 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("one more file through the mount: %v, want ENOSPC", err)
	}
}

// keptFiles counts the objects the journal keeps that are no directory:
// kept/'s files and its groups'.
func keptFiles(t *testing.T, backing string) int {
	n := 0
	err := filepath.WalkDir(filepath.Join(backing, ".realm-journal", "kept"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestJournalPrunesWhenIdle: the pruner waits while the mount is busy
// (the journal may pass its bounds by their slack meanwhile) and brings
// the journal back within them once it is idle: after an rm -rf of 250
// files made in BACKING, each kept, with journal_max_files=200 (past the
// bound, within its slack), kept/ holds at most 200 files again. A pacer
// that did not see the mount go idle would leave it past the bound until
// a later busy spell took it past the slack.
func TestJournalPrunesWhenIdle(t *testing.T) {
	t.Parallel()
	const bound, files = 200, 250
	m := mount(t, Opts("journal=on", fmt.Sprintf("journal_max_files=%d", bound)), Prepare(func(m *Mount) {
		if err := os.Mkdir(m.BackingPath("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			writeFile(t, m.BackingPath("d", fmt.Sprintf("f%d", i)), "x\n")
		}
	}))
	run(t, "", nil, "rm", "-rf", m.Path("d"))
	after := keptFiles(t, m.Backing)
	if n := waitKeptAtMost(t, m.Backing, bound); n > bound {
		log, _ := os.ReadFile(m.LogFile)
		t.Fatalf("kept/ holds %d files %v after the rm -rf, past journal_max_files=%d on an idle mount; log:\n%s", n, stateTimeout, bound, log)
	}
	t.Logf("kept/ held %d files right after the rm -rf of %d, at most %d once idle", after, files, bound)
}

// waitKeptAtMost waits until kept/ in backing's journal holds at most n
// files, and returns how many it holds then (more than n once
// stateTimeout has passed). It counts again at each removal inotify
// reports in kept/ or its groups (a prune's), never on a timer; the
// watches are set before the first count, so no removal goes unseen.
func waitKeptAtMost(t *testing.T, backing string, n int) int {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	const mask = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_DELETE_SELF
	kept := filepath.Join(backing, ".realm-journal", "kept")
	dirs := []string{kept}
	ents, err := os.ReadDir(kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() { // a group: the idle mount makes no new one
			dirs = append(dirs, filepath.Join(kept, e.Name()))
		}
	}
	for _, d := range dirs {
		// A group gone already was pruned: the first count sees it.
		if _, err := unix.InotifyAddWatch(in, d, mask); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Fatalf("watching %s: %v", d, err)
		}
	}
	deadline := time.Now().Add(stateTimeout)
	buf := make([]byte, 64<<10)
	for {
		c := keptFiles(t, backing)
		left := time.Until(deadline)
		if c <= n || left <= 0 {
			return c
		}
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		for { // drain: the next count sees every removal reported
			if _, err := unix.Read(in, buf); err != nil {
				break
			}
		}
	}
}
