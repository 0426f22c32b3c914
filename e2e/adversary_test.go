package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// adversaryOps is how many operations the adversary run makes through the
// mount: a count, not a duration, so a loaded machine (or a race-built
// daemon) makes the run longer, never weaker and never a failure.
// REALM_ADVERSARY_OPS changes it (make test: 15,000; make soak: 60,000).
const adversaryOps = 40_000

// snapshotTree records everything observable of a tree that a write could
// change: names, types, modes, sizes, mtimes, ctimes, inode numbers, link
// targets, xattrs and content hashes.
// Top-level names in skip are recorded by name only and not descended.
func snapshotTree(t *testing.T, root string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Dir(path) == root && slices.Contains(skip, d.Name()) {
			out[d.Name()] = "(not compared)"
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o size=%d ino=%d nlink=%d uid=%d mtime=%d.%09d ctime=%d.%09d",
			st.Mode, st.Size, st.Ino, st.Nlink, st.Uid, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
		case unix.S_IFLNK:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		buf := make([]byte, 4096)
		if n, err := unix.Llistxattr(path, buf); err == nil && n > 0 {
			desc += " xattrs=" + strings.ReplaceAll(string(buf[:n]), "\x00", ",")
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

func diffSnapshots(before, after map[string]string) []string {
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if v != w {
			diffs = append(diffs, fmt.Sprintf("changed %s: %s => %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "created "+k+": "+after[k])
		}
	}
	slices.Sort(diffs)
	return diffs
}

func fstat(t *testing.T, fd int) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// swapper is one adversary process outside the mount.
type swapper struct{ *proc }

// startSwapper starts the adversary process; pairs are DIR:A:B.
func startSwapper(t *testing.T, pause time.Duration, pairs ...string) *swapper {
	t.Helper()
	s := &swapper{startProc(t, helperCmd(context.Background(), nil, "swap", append([]string{pause.String()}, pairs...)...), true)}
	if line, err := s.stdout.ReadString('\n'); err != nil || line != "swapping\n" {
		t.Fatalf("swapper did not start: %q %v", line, err)
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the swapper (it restores the original arrangement) and returns
// how many exchanges it made.
func (s *swapper) stop(t *testing.T) int64 {
	if s.stdin == nil {
		return 0
	}
	s.closeStdin()
	line, _ := s.stdout.ReadString('\n')
	if err := s.wait(); err != nil {
		t.Errorf("swapper: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Errorf("swapper count %q: %v", line, err)
	}
	return n
}

// advStats counts what operations through the mount observed.
type advStats struct {
	mu       sync.Mutex
	inside   map[string]int // op → served inside content
	errs     map[string]int // op/errno → count
	breaches []string       // outside content or names observed (must stay empty)
	swapped  atomic.Int64   // observations of d as a symlink or as an error
	total    atomic.Int64
}

func (s *advStats) ok(op string) {
	s.total.Add(1)
	s.mu.Lock()
	s.inside[op]++
	s.mu.Unlock()
}

func (s *advStats) err(op string, err error) {
	s.total.Add(1)
	s.swapped.Add(1)
	s.mu.Lock()
	s.errs[op+"/"+errnoName(errnoOf(err))]++
	s.mu.Unlock()
}

func (s *advStats) breach(format string, args ...any) {
	s.total.Add(1)
	s.mu.Lock()
	if len(s.breaches) < 20 {
		s.breaches = append(s.breaches, fmt.Sprintf(format, args...))
	}
	s.mu.Unlock()
}

// TestAdversarySwap: a process outside the mount exchanges (renameat2
// RENAME_EXCHANGE) a directory of BACKING with symlinks to a directory
// outside BACKING (absolute and relative), and a file and a subdirectory of
// it with symlinks to their outside namesakes, as fast as it can, while
// readers and a writer use those paths through the mount at least 100,000
// times. The outside's bytes are never served, no outside name is listed or
// inode reported, every create that succeeds lands in the real directory,
// and nothing outside BACKING is created or changed.
func TestAdversarySwap(t *testing.T) {
	t.Parallel()
	const (
		insideData  = "inside content, served by the mount\n"
		sentinel    = "SENTINEL: this file is outside BACKING and must never be read through the mount\n"
		subInside   = "sub inside\n"
		subSentinel = "SENTINEL sub, outside\n"
	)
	m := mount(t, Prepare(func(m *Mount) {
		writeFile(t, m.BackingPath("d/inside.txt"), insideData)
		writeFile(t, m.BackingPath("d/sub/f"), subInside)
		writeFile(t, filepath.Join(m.Outside, "inside.txt"), sentinel)
		writeFile(t, filepath.Join(m.Outside, "sub/f"), subSentinel)
		writeFile(t, filepath.Join(m.Outside, "only-outside"), sentinel)
		for link, target := range map[string]string{
			"d.abs":        m.Outside,
			"d.rel":        "../outside",
			"d/inside.lnk": "../../outside/inside.txt",
			"d/sub.lnk":    filepath.Join(m.Outside, "sub"),
		} {
			if err := os.Symlink(target, m.BackingPath(link)); err != nil {
				t.Fatal(err)
			}
		}
	}))
	outsideIno := lstat(t, m.Outside).Ino
	sentinelIno := lstat(t, filepath.Join(m.Outside, "inside.txt")).Ino
	subSentinelIno := lstat(t, filepath.Join(m.Outside, "sub/f")).Ino
	outsideBefore := snapshotTree(t, m.Outside)
	// The root holds BACKING, the mount, the outside dir and state/ (the
	// audit log); anything else appearing there, or a change of the root
	// itself, came from outside BACKING.
	rootSkip := []string{"backing", "mnt", "outside", "state"}
	rootBefore := snapshotTree(t, m.Root, rootSkip...)
	realDir := lstat(t, m.BackingPath("d")).Ino
	// The real d, held by fd from before the adversary starts (opening it
	// by name later could follow the swapped-in symlink).
	realFd, err := unix.Open(m.BackingPath("d"), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(realFd)
	if st := fstat(t, realFd); st.Ino != realDir {
		t.Fatalf("held fd of d has inode %d, want %d", st.Ino, realDir)
	}
	// Names that may legitimately be listed in d: its own and the writer's.
	insideName := func(name string) bool {
		switch name {
		case "inside.txt", "inside.lnk", "sub", "sub.lnk":
			return true
		}
		return strings.HasPrefix(name, "w-") || strings.HasPrefix(name, "m-")
	}

	// One process outside the mount: it holds BACKING and the real d by fd
	// (opened before the first exchange) and exchanges d with an absolute
	// and a relative symlink to the outside directory, and, inside d, a file
	// and a directory with symlinks to their outside namesakes.
	d := m.BackingPath("d")
	adversary := startSwapper(t, 0,
		m.Backing+":d:d.abs", d+":inside.txt:inside.lnk", d+":sub:sub.lnk", m.Backing+":d:d.rel")

	stats := &advStats{inside: map[string]int{}, errs: map[string]int{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	insidePath, subPath, dPath := m.Path("d/inside.txt"), m.Path("d/sub/f"), m.Path("d")
	checkData := func(op string, b []byte, err error, want string) {
		switch {
		case err != nil:
			stats.err(op, err)
		case bytes.Contains(b, []byte("SENTINEL")):
			stats.breach("%s returned outside bytes %q", op, b)
		case string(b) != want:
			stats.breach("%s returned unexpected bytes %q", op, b)
		default:
			stats.ok(op)
		}
	}
	checkStat := func(op string, st *unix.Stat_t, err error, wantSize int64) {
		switch {
		case err != nil:
			stats.err(op, err)
		case st.Ino == sentinelIno || st.Ino == subSentinelIno || st.Ino == outsideIno:
			stats.breach("%s returned an outside inode %d", op, st.Ino)
		case wantSize >= 0 && st.Size != wantSize:
			stats.breach("%s returned size %d, want %d", op, st.Size, wantSize)
		default:
			stats.ok(op)
		}
	}
	reader := func(seed int) {
		defer wg.Done()
		buf := make([]byte, 4096)
		for i := seed; !stop.Load(); i++ {
			switch i % 7 {
			case 0:
				b, err := os.ReadFile(insidePath)
				checkData("read d/inside.txt", b, err, insideData)
			case 1:
				var st unix.Stat_t
				err := unix.Stat(insidePath, &st)
				checkStat("stat d/inside.txt", &st, err, int64(len(insideData)))
			case 2:
				entries, err := os.ReadDir(dPath)
				if err != nil {
					stats.err("readdir d", err)
					continue
				}
				bad := ""
				for _, e := range entries {
					if !insideName(e.Name()) {
						bad = e.Name()
					}
				}
				if bad != "" {
					stats.breach("readdir d listed %q", bad)
				} else {
					stats.ok("readdir d")
				}
			case 3:
				fd, err := unix.Open(insidePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					stats.err("open+fstat+read d/inside.txt", err)
					continue
				}
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil || st.Ino == sentinelIno {
					stats.breach("fstat of an opened d/inside.txt: ino %d, %v", st.Ino, err)
				}
				n, err := unix.Read(fd, buf)
				unix.Close(fd)
				checkData("open+fstat+read d/inside.txt", buf[:max(n, 0)], err, insideData)
			case 4:
				var st unix.Stat_t
				err := unix.Stat(dPath, &st)
				if err == nil && st.Ino != realDir {
					stats.breach("stat d gave inode %d, want the real d %d", st.Ino, realDir)
					continue
				}
				checkStat("stat d", &st, err, -1)
			case 5:
				b, err := os.ReadFile(subPath)
				checkData("read d/sub/f", b, err, subInside)
			case 6:
				var st unix.Stat_t
				err := unix.Lstat(dPath, &st)
				if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					stats.swapped.Add(1)
				}
				checkStat("lstat d", &st, err, -1)
			}
		}
	}
	// The writer tries to create, write and modify at the path. A create
	// that succeeds must have landed in the real d: it is checked at once
	// through an fd held on the real d, then removed through that fd, so d
	// stays small (a d of thousands of entries would make every listing slow).
	landedInside := func(name, want string) {
		fd, err := unix.Openat(realFd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			stats.breach("created d/%s through the mount, but it is not in the real d: %v", name, err)
			return
		}
		buf := make([]byte, 256)
		n, _ := unix.Read(fd, buf)
		unix.Close(fd)
		if want != "" && string(buf[:max(n, 0)]) != want {
			stats.breach("d/%s in the real d holds %q, want %q", name, buf[:max(n, 0)], want)
		}
		flags := 0
		if want == "" {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(realFd, name, flags); err != nil {
			stats.breach("removing d/%s from the real d: %v", name, err)
		}
	}
	writer := func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			name := fmt.Sprintf("w-%06d", i)
			switch i % 4 {
			case 0:
				data := "written by the writer " + name + "\n"
				f, err := os.OpenFile(m.Path("d", name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					stats.err("create d/w-*", err)
					continue
				}
				_, werr := f.WriteString(data)
				cerr := f.Close()
				if werr != nil || cerr != nil {
					stats.err("write d/w-*", errors.Join(werr, cerr))
					continue
				}
				landedInside(name, data)
				stats.ok("create+write d/w-*")
			case 1:
				name = fmt.Sprintf("m-%06d", i)
				if err := os.Mkdir(m.Path("d", name), 0o755); err != nil {
					stats.err("mkdir d/m-*", err)
					continue
				}
				landedInside(name, "")
				stats.ok("mkdir d/m-*")
			case 2:
				err := unix.Setxattr(insidePath, "user.adversary", []byte(name), 0)
				if err != nil {
					stats.err("setxattr d/inside.txt", err)
				} else {
					stats.ok("setxattr d/inside.txt")
				}
			case 3:
				err := os.Chmod(subPath, 0o644)
				if err != nil {
					stats.err("chmod d/sub/f", err)
				} else {
					stats.ok("chmod d/sub/f")
				}
			}
		}
	}
	const readers = 3
	wg.Add(readers + 1)
	for r := range readers {
		go reader(r * 3)
	}
	go writer()
	start := time.Now()
	ops := int64(envInt(t, "REALM_ADVERSARY_OPS", adversaryOps))
	for stats.total.Load() < ops {
		time.Sleep(50 * time.Millisecond) // polls a count the workers raise
	}
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	swaps := adversary.stop(t)

	total := stats.total.Load()
	served := 0
	for _, n := range stats.inside {
		served += n
	}
	errTotal := 0
	for _, n := range stats.errs {
		errTotal += n
	}
	t.Logf("%v: %d operations through the mount (%d served inside content, %d refused or failed); %d exchanges by the adversary",
		elapsed.Round(time.Millisecond), total, served, errTotal, swaps)
	t.Logf("served: %v", stats.inside)
	t.Logf("errors: %v", stats.errs)

	for _, b := range stats.breaches {
		t.Errorf("BREACH: %s", b)
	}
	if served == 0 {
		t.Errorf("no operation was served inside content: the test exercised nothing but refusals")
	}
	if swaps < 10_000 {
		t.Errorf("the adversary made only %d exchanges", swaps)
	}
	if stats.swapped.Load() == 0 {
		t.Errorf("no operation ever observed the swapped state (symlink or refusal): the race was not exercised")
	}

	if diffs := diffSnapshots(outsideBefore, snapshotTree(t, m.Outside)); len(diffs) > 0 {
		t.Errorf("the outside directory changed:\n%s", strings.Join(diffs, "\n"))
	}
	if rootDiffs := diffSnapshots(rootBefore, snapshotTree(t, m.Root, rootSkip...)); len(rootDiffs) > 0 {
		t.Errorf("something outside BACKING changed:\n%s", strings.Join(rootDiffs, "\n"))
	}
	if st := lstat(t, m.BackingPath("d")); st.Ino != realDir {
		t.Fatalf("the adversary did not restore d (ino %d, want %d)", st.Ino, realDir)
	}
	// With the adversary gone, the mount serves d again.
	deadline := time.Now().Add(stateTimeout)
	for {
		b, err := os.ReadFile(insidePath)
		if err == nil && string(b) == insideData {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after the adversary stopped, reading d/inside.txt: %q, %v", b, err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}
