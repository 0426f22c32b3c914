// Package kernelcheck says which Linux realmfs runs on: the oldest
// release it accepts (Check, before the mount) and what the mounted
// kernel's FUSE lacks that realm would use (Notes, for the daemon's log).
// It is a package of its own because it needs nothing of the mount:
// cmd/realmfs asks it before and after mounting.
package kernelcheck

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Min is the oldest Linux realmfs runs on (Debian 11's 5.10 LTS).
// Newer calls each have a fallback (tested in package dirfd by taking the
// call away with a seccomp filter): openat2 (5.6) falls back to openat with
// O_NOFOLLOW on single names, fchmodat2 (6.6) to /proc/self/fd/N, pidfds
// with PIDFD_THREAD (6.9) to /proc/PID/stat start times; FUSE passthrough
// (6.9) is negotiated at mount, and without it the daemon serves reads.
var Min = [2]int{5, 10}

// Check refuses a kernel release (uname -r) older than Min.
func Check(release string) error {
	major, minor, ok := parseRelease(release)
	if !ok {
		return nil // an unknown scheme: let the mount say what is missing
	}
	if major < Min[0] || major == Min[0] && minor < Min[1] {
		return fmt.Errorf("realmfs needs Linux %d.%d or later; this kernel is %s", Min[0], Min[1], release)
	}
	return nil
}

// parseRelease reads "MAJOR.MINOR" from the front of a kernel release.
func parseRelease(r string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(r, ".")
	if !found {
		return 0, 0, false
	}
	b := rest
	if i := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' }); i >= 0 {
		b = rest[:i]
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil
}

// Notes lists what the mounted kernel's FUSE lacks that realm would
// use, one sentence each, for the daemon's log.
func Notes(in *fuse.InitIn) []string {
	var notes []string
	if in == nil {
		return nil
	}
	if in.Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP == 0 {
		notes = append(notes, "the kernel cannot map files open for writing shared (FUSE DIRECT_IO_ALLOW_MMAP, Linux 6.6): mmap(MAP_SHARED) of them fails with ENODEV, so SQLite's WAL mode does not work on the mount")
	}
	if in.Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		notes = append(notes, "no FUSE passthrough (Linux 6.9): the daemon serves every read")
	}
	return notes
}
