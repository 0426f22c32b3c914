package e2e

// Issue 11 end to end: the kernel caches names, attributes, absent names and
// listings for a minute by default, and changes made in BACKING behind the
// mount reach it as invalidations from realmfs's watcher. Nothing here is a
// timed assertion: each change must be seen long before the kernel's own
// cache would have let it through (a minute), and the latencies are logged
// (docs/PERFORMANCE.md).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// seenBound is how long a change in BACKING may take to show through the
// mount before the test calls it missed: far below the one-minute cache
// timeouts, so a change seen in time was seen because realmfs invalidated
// the kernel's cache, far above any notification latency.
const seenBound = 10 * time.Second

// waitSeen polls cond until it holds and returns how long that took; it
// fails the test after seenBound.
func waitSeen(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > seenBound {
			t.Fatalf("%s: not seen through the mount after %v (the kernel caches for a minute: no invalidation reached it)", what, seenBound)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return time.Since(start)
}

// TestBackingChangesSeen: 200 changes made in BACKING (content rewritten in
// place, file created, deleted, renamed, directory created) are each seen
// through the mount, with default options, after the mount has cached the
// state before them.
func TestBackingChangesSeen(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) {
		os.Mkdir(m.BackingPath("d"), 0o755)
		writeFile(t, m.BackingPath("d", "f"), "v0\n")
	}))
	if out := readFile(t, m.LogFile); strings.Contains(out, "short default timeouts") {
		t.Fatalf("BACKING is not watched:\n%s", out)
	}
	exists := func(rel string) bool {
		var st unix.Stat_t
		return unix.Lstat(m.Path(rel), &st) == nil
	}
	listed := func(dir, name string) bool {
		ents, err := os.ReadDir(m.Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == name })
	}
	var lat []time.Duration
	for i := range 200 {
		switch i % 5 {
		case 0: // content rewritten in place, size changed
			readFile(t, m.Path("d", "f")) // cached
			want := fmt.Sprintf("version %d %s\n", i, strings.Repeat("x", i))
			f, err := os.OpenFile(m.BackingPath("d", "f"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(want)
			f.Close()
			lat = append(lat, waitSeen(t, "a rewrite in place", func() bool {
				var st unix.Stat_t
				if unix.Stat(m.Path("d", "f"), &st) != nil || st.Size != int64(len(want)) {
					return false
				}
				b, err := os.ReadFile(m.Path("d", "f"))
				return err == nil && string(b) == want
			}))
		case 1: // a file created where the kernel cached its absence
			name := fmt.Sprintf("new%d", i)
			if exists("d/" + name) {
				t.Fatalf("%s exists before it was made", name)
			}
			listed("d", name) // the listing is cached too
			writeFile(t, m.BackingPath("d", name), "new\n")
			lat = append(lat, waitSeen(t, "a created file", func() bool { return exists("d/"+name) && listed("d", name) }))
		case 2: // that file deleted
			name := fmt.Sprintf("new%d", i-1)
			if err := os.Remove(m.BackingPath("d", name)); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, waitSeen(t, "a deleted file", func() bool { return !exists("d/"+name) && !listed("d", name) }))
		case 3: // a file renamed over another name
			from, to := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
			writeFile(t, m.BackingPath("d", from), "moved\n")
			waitSeen(t, "a file to rename", func() bool { return exists("d/" + from) })
			exists("d/" + to)
			if err := os.Rename(m.BackingPath("d", from), m.BackingPath("d", to)); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, waitSeen(t, "a rename", func() bool { return !exists("d/"+from) && exists("d/"+to) }))
		case 4: // a directory created, and a file in it
			dir := fmt.Sprintf("d/sub%d", i)
			exists(dir)
			if err := os.Mkdir(m.BackingPath(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, m.BackingPath(dir, "x"), "x\n")
			lat = append(lat, waitSeen(t, "a created directory", func() bool { return exists(dir + "/x") }))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%d changes in BACKING seen through the mount: p50 %v, p99 %v, max %v",
		len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// TestBackingChangesSeenAfterCommit: the file a commit made through the
// mount (a created file and a rewritten one) is the daemon's temp renamed
// into place, whose own changes the watcher ignores while it is a temp
// (watcher.quiet). Once committed, the host's changes to it, of content
// in place and of mode, are each seen through the mount.
func TestBackingChangesSeenAfterCommit(t *testing.T) {
	t.Parallel()
	m := mount(t, Prepare(func(m *Mount) { os.Mkdir(m.BackingPath("d"), 0o755) }))
	size := func(rel string) int64 {
		var st unix.Stat_t
		if unix.Stat(m.Path(rel), &st) != nil {
			return -1
		}
		return st.Size
	}
	mode := func(rel string) uint32 {
		var st unix.Stat_t
		if unix.Stat(m.Path(rel), &st) != nil {
			return 0
		}
		return st.Mode & 0o7777
	}
	for i := range 20 {
		rel := fmt.Sprintf("d/f%d", i)
		writeFile(t, m.Path(rel), "through the mount\n") // created: a commit
		if i%2 == 1 {
			writeFile(t, m.Path(rel), "rewritten through the mount\n") // and rewritten: another
		}
		want := fmt.Sprintf("changed in BACKING %d %s\n", i, strings.Repeat("x", i))
		if size(rel) == int64(len(want)) {
			t.Fatalf("%s: already %d bytes", rel, len(want))
		}
		f, err := os.OpenFile(m.BackingPath(rel), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(want)
		f.Close()
		waitSeen(t, "a committed file rewritten in BACKING", func() bool {
			b, err := os.ReadFile(m.Path(rel))
			return size(rel) == int64(len(want)) && err == nil && string(b) == want
		})
		if mode(rel) == 0o600 {
			t.Fatalf("%s: mode 0600 already", rel)
		}
		if err := os.Chmod(m.BackingPath(rel), 0o600); err != nil {
			t.Fatal(err)
		}
		waitSeen(t, "a committed file's mode changed in BACKING", func() bool { return mode(rel) == 0o600 })
	}
}

// TestBackingCredentialDeniedAtFirstOpen: a credential file created in
// BACKING after the kernel cached its absence is refused at its first open
// through the mount (the open always reaches the guard; the absence is
// invalidated so the open finds it).
func TestBackingCredentialDeniedAtFirstOpen(t *testing.T) {
	t.Parallel()
	m := mount(t)
	for i := range 20 {
		name := fmt.Sprintf("app%d/.env", i)
		os.Mkdir(m.BackingPath(filepath.Dir(name)), 0o755)
		waitSeen(t, "a directory", func() bool { _, err := os.Stat(m.Path(filepath.Dir(name))); return err == nil })
		if _, err := os.ReadFile(m.Path(name)); !os.IsNotExist(err) {
			t.Fatalf("%s before it exists: %v", name, err)
		}
		writeFile(t, m.BackingPath(name), "SECRET=1\n")
		waitSeen(t, "a credential made in BACKING", func() bool {
			_, err := os.ReadFile(m.Path(name))
			switch errnoOf(err) {
			case unix.EACCES:
				return true
			case unix.ENOENT:
				return false
			}
			t.Fatalf("open %s: %v, want EACCES", name, err)
			return false
		})
	}
}

// stallMkdir starts a mkdir of dir/name that the daemon (built for tests,
// with REALMFS_TEST_STALL_MKDIR) stalls, holding the kernel's lock of dir,
// and returns once the daemon has it; release lets it go on and waits for
// it.
func stallMkdir(t *testing.T, m *Mount, dir, name string) (release func() error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	mkdir := exec.CommandContext(ctx, "mkdir", m.Path(dir, name))
	if err := mkdir.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	var err error
	release = func() error {
		once.Do(func() {
			os.WriteFile(m.BackingPath(name+".go"), nil, 0o644)
			err = mkdir.Wait()
			cancel()
		})
		return err
	}
	t.Cleanup(func() { release() })
	waitLog(t, m, "test: stalling mkdir "+name)
	return release
}

// TestKilledWhileNotificationWaits: an invalidation sent while a process
// holds the directory's lock for a request in the daemon (forced here:
// realm itself waits for such requests to end) sleeps in the kernel until
// the request is answered. Killed then, the daemon still dies at once: the
// notification was written on a thread with a descriptor table of its own,
// so the daemon's own descriptor of the device closes, the kernel ends the
// request, the lock is let go and the notification finishes.
func TestKilledWhileNotificationWaits(t *testing.T) {
	t.Parallel()
	m := mount(t, Binary(realmtestBinary(t), "REALMFS_TEST_STALL_MKDIR=stall", "REALMFS_TEST_NOTIFY_WHEN_BUSY=1"), Prepare(func(m *Mount) {
		os.Mkdir(m.BackingPath("d"), 0o755)
	}))
	if _, err := os.ReadDir(m.Path("d")); err != nil {
		t.Fatal(err)
	}
	stallMkdir(t, m, "d", "stall")
	writeFile(t, m.BackingPath("d", "y"), "y\n")
	waitSeen(t, "the invalidation of d/y asleep on d's lock", func() bool {
		return strings.Contains(threadStates(m.Pid), "fuse_reverse_inval_entry")
	})
	if stuck := m.KillWithin(5 * time.Second); stuck != "" {
		t.Errorf("SIGKILL while an invalidation slept on a directory's lock: %s", stuck)
	}
	m.Restart()
	ents, err := os.ReadDir(m.Path("d"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "y" {
		t.Errorf("after the restart d holds %v (%v), want y alone", ents, err)
	}
}

// TestNotificationOnLockedDirStallsNothing: an entry invalidation takes the
// directory's lock in the kernel, which a process holds while it waits for
// the daemon (a mkdir in it, here stalled by realmfs built for tests). The
// invalidation of a change made in that directory in BACKING waits, in the
// daemon, until the directory's requests are answered: meanwhile opens,
// reads, writes and listings elsewhere go on, no daemon thread sleeps in the
// kernel on the lock, and the daemon still dies at once of SIGKILL (a thread
// asleep on the lock would keep it, and every request, hanging).
func TestNotificationOnLockedDirStallsNothing(t *testing.T) {
	t.Parallel()
	m := mount(t, Binary(realmtestBinary(t), "REALMFS_TEST_STALL_MKDIR=stall"), Prepare(func(m *Mount) {
		os.Mkdir(m.BackingPath("d"), 0o755)
		writeFile(t, m.BackingPath("f"), "f\n")
	}))
	ls := func(rel string) []string {
		ents, err := os.ReadDir(m.Path(rel))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	stall := func(name string) func() error { return stallMkdir(t, m, "d", name) }
	// handled waits until the notifier has handled the batch holding a
	// change just made in BACKING's d: it tries the batch's entries (d/x
	// waits for d's lock, or wrongly sleeps on it) before it sends d's
	// attributes, so the mount then shows d's new mtime (cached before the
	// change by a stat). A thread asleep on the lock ends the wait too.
	handled := func(what string) {
		waitSeen(t, what, func() bool {
			a, errA := os.Stat(m.Path("d"))
			b, errB := os.Stat(m.BackingPath("d"))
			return errA == nil && errB == nil && a.ModTime().Equal(b.ModTime()) ||
				strings.Contains(threadStates(m.Pid), "fuse_reverse_inval")
		})
	}
	ls("d")
	release := stall("stall1")
	// The kernel holds d's lock for the mkdir: the invalidation of d/x
	// must wait for it without a thread asleep in the kernel.
	if _, err := os.Stat(m.Path("d")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.BackingPath("d", "x"), "x\n")
	handled("d's attributes after the change to d/x")
	done := make(chan error, 1)
	go func() {
		for i := range 20 {
			name := m.Path(fmt.Sprintf("g%d", i))
			if err := os.WriteFile(name, []byte("g\n"), 0o644); err != nil {
				done <- err
				return
			}
			if b, err := os.ReadFile(name); err != nil || string(b) != "g\n" {
				done <- fmt.Errorf("read %s: %q %v", name, b, err)
				return
			}
			if _, err := os.ReadFile(m.Path("f")); err != nil {
				done <- err
				return
			}
			if _, err := os.ReadDir(m.Dir); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("requests while an invalidation waits for a locked directory: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("requests elsewhere on the mount stalled while an invalidation waited for d:\n%s", m.logTail())
	}
	if states := threadStates(m.Pid); strings.Contains(states, "fuse_reverse_inval") {
		t.Errorf("a daemon thread sleeps in the kernel on d's lock: %s", states)
	}
	if strings.Contains(readFile(t, m.LogFile), "test: mkdir stall1 goes on") {
		t.Error("the mkdir stopped stalling before the other requests were done: the test proved nothing")
	}
	if err := release(); err != nil {
		t.Errorf("the stalled mkdir: %v", err)
	}
	waitSeen(t, "the change made while d was locked", func() bool { return slices.Contains(ls("d"), "x") })

	// Killed while an invalidation waits: the daemon dies at once.
	if _, err := os.Stat(m.Path("d")); err != nil {
		t.Fatal(err)
	}
	stall("stall2")
	writeFile(t, m.BackingPath("d", "y"), "y\n")
	handled("d's attributes after the change to d/y")
	if stuck := m.KillWithin(5 * time.Second); stuck != "" {
		t.Errorf("SIGKILL while an invalidation waited for a locked directory: %s", stuck)
	}
	m.Restart()
	if !slices.Contains(ls("d"), "y") {
		t.Errorf("after the restart d holds %v, want y", ls("d"))
	}
}
