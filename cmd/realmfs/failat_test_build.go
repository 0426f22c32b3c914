//go:build realmtest

package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs"
	"github.com/realm-dev/realm/internal/profiling"
	"github.com/realm-dev/realm/internal/sysfail"
)

// testFailAt, in binaries built with -tags realmtest for the e2e suite,
// fails every commit at the stage named by REALMFS_FAIL_AT.
func testFailAt() func(fusefs.Stage) bool {
	stage := fusefs.Stage(os.Getenv("REALMFS_FAIL_AT"))
	if stage == "" {
		return nil
	}
	return func(s fusefs.Stage) bool { return s == stage }
}

// testProfile, in test builds, profiles the daemon for the benchmarks:
// its CPU into REALMFS_CPUPROFILE, its mutex and blocking events into
// REALMFS_MUTEXPROFILE and that name.block, its allocations into
// REALMFS_ALLOCPROFILE. The returned function writes them out once the
// server has stopped.
func testProfile() func() {
	return profiling.Start(os.Getenv("REALMFS_CPUPROFILE"), os.Getenv("REALMFS_MUTEXPROFILE"), os.Getenv("REALMFS_ALLOCPROFILE"))
}

// testSysfail, in test builds, makes the backing filesystem look like one
// that lacks a call, once the mount is up: REALMFS_TEST_SYSFAIL=open fails
// every data open of a backing file (openat with O_NOFOLLOW|O_NONBLOCK, not
// O_PATH) with ENOSYS, opendir every reopen of a directory for listing
// (O_DIRECTORY without O_PATH). openat2 is taken away too, so that the
// opens go through openat, which the filter can tell apart.
func testSysfail() error {
	what := os.Getenv("REALMFS_TEST_SYSFAIL")
	if what == "" {
		return nil
	}
	rules := []sysfail.Rule{{Nr: unix.SYS_OPENAT2, Arg: -1, Errno: syscall.ENOSYS}}
	switch what {
	case "open":
		rules = append(rules, sysfail.Rule{Nr: unix.SYS_OPENAT, Arg: 2, Set: unix.O_NOFOLLOW | unix.O_NONBLOCK, Clear: unix.O_PATH, Errno: syscall.ENOSYS})
	case "opendir":
		rules = append(rules, sysfail.Rule{Nr: unix.SYS_OPENAT, Arg: 2, Set: unix.O_DIRECTORY, Clear: unix.O_PATH, Errno: syscall.ENOSYS})
	default:
		return fmt.Errorf("REALMFS_TEST_SYSFAIL=%q: want open or opendir", what)
	}
	if err := sysfail.Install(rules, true); err != nil {
		return err
	}
	log.Printf("test: system calls taken away: %s", what)
	return nil
}

// testBeforeMkdir, in test builds, stalls a mkdir of a name that starts
// with REALMFS_TEST_STALL_MKDIR until a file of that name plus ".go"
// appears in BACKING's root (at most a minute), holding the kernel's lock
// of the parent directory all that while.
func testBeforeMkdir(backing string) func(string) {
	stall := os.Getenv("REALMFS_TEST_STALL_MKDIR")
	if stall == "" {
		return nil
	}
	return func(name string) {
		if !strings.HasPrefix(name, stall) {
			return
		}
		log.Printf("test: stalling mkdir %s", name)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(backing, name+".go")); err == nil {
				break
			}
		}
		log.Printf("test: mkdir %s goes on", name)
	}
}

// testNotifyWhenBusy, in test builds, lets REALMFS_TEST_NOTIFY_WHEN_BUSY=1
// send entry invalidations into directories with requests in progress.
func testNotifyWhenBusy() bool { return os.Getenv("REALMFS_TEST_NOTIFY_WHEN_BUSY") == "1" }
